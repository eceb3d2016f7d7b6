"""Padded-row ids judged against the model's own mass for them.

A checkpoint's padded rows, ids in [tokenizer length, vocab_size), are untrained but not -inf: the model gives them a
little mass, so a correct sampler emits one now and then (SGLang 0.5.17 with speculation off: 1 in 38,400 tokens at
T=1 on the fixture model). Zero tolerance stays for `vocab_size - 1` (the sampler's fallback, where it is a padded
row: on a checkpoint without padded rows it is an ordinary token) and ids outside [0, vocab_size); the other padded
rows, [tokenizer length, vocab_size - 1), are judged here, one-sided, by every family that counts them (the correctness
suite per sampling case, GSM8K per temperature: `judge_answers`).

The model's own mass comes from a scoring request on the server under test: the prompt and the generated ids as
input, `max_new_tokens` 0 (prefill: no speculation, the target's own distribution), `return_logprob` from the last
prompt position, `top_logprobs_num` K and `token_ids_logprob` = the padded ids (SGLang 0.5.23
managers/io_struct.py:237; answered as `meta_info.input_token_ids_logprobs`, one list of [logprob, id, text] per
position, the first null: managers/tokenizer_manager.py:2974-3004). It is sent at temperature 1, where SGLang's input
logprobs are log_softmax(logits) whatever the reading of other temperatures.

At a generation's temperature T and top_p the padded mass at one position is at most
    U = min(1, N / (N + D) / top_p),  N = sum over padded ids of exp((l_i + slack) / T),
                                       D = sum over the other returned top-K ids of exp((l_j - slack) / T),
since the partition function at T is at least N + D (distinct ids), and a nucleus renormalises by a mass >= top_p.
`slack` (nats, per logit) covers the numerics between the generation's forward and the scoring prefill. At T = 0
a padded id can only be the argmax: U = 1 when the best padded logit is within 2 * slack of the best other one, else 0.
The observed count k over all judged positions is tested against Poisson(sum U) upper tail, P(X >= k): for
independent Bernoulli trials of total mean lambda the Poisson tail bounds the Poisson-binomial one for k >= lambda + 1
(Hoeffding 1956; Anderson and Samuels 1967), and below that the p-value is large anyway.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from specsuite.errors import SpecsuiteError
from specsuite.server import kinds
from specsuite.server.generation import Generation
from specsuite.server.meta_info import MetaInfo
from specsuite.server.protocol import GenerationRequest, Sampling, ServerClient
from specsuite.server.transport import shorten
from specsuite.server.vocab import VocabInfo
from specsuite.stats.lazy_scipy import stats

SCORING_TOP_K = 20
# One bfloat16 step of a logit in [8, 16) (eight float16 steps): how far the generation's and the scoring forward's
# logits may differ before the bound needs it.
DEFAULT_SLACK_NATS = 0.0625


def judged_padded_ids(vocab: VocabInfo) -> list[int]:
    """The padded rows judged against the model's mass: [tokenizer length, vocab_size - 1)."""
    return list(range(vocab.tokenizer_length, vocab.vocab_size - 1))


def padded_scoring_request(prompt_ids: Sequence[int], output_ids: Sequence[int], padded_ids: Sequence[int],
                           top_k: int = SCORING_TOP_K) -> GenerationRequest:
    """Prefill-only scoring of `output_ids` after `prompt_ids` at temperature 1, logprobs from the last prompt position
    (its entry is null), so entry i + 1 is output token i's distribution."""
    return GenerationRequest(prompt_ids=(*prompt_ids, *output_ids), sampling=Sampling(temperature=1.0, max_new_tokens=0),
                             logprobs=True, top_logprobs=top_k, logprob_start=len(prompt_ids) - 1,
                             token_ids_logprob=tuple(padded_ids))


@dataclass(frozen=True)
class PositionLogprobs:
    """Raw (T=1) logprobs at one generated position: the top-K and the requested padded ids, by id."""

    top: dict[int, float]
    padded: dict[int, float]


def _pairs(entry: Any, what: str, index: int) -> dict[int, float]:
    if not isinstance(entry, list) or not entry:
        raise SpecsuiteError(f"padded-row scoring: {what}[{index}] is {shorten(repr(entry), 60)}, not a list of [logprob, id, text]")
    found: dict[int, float] = {}
    for triple in entry:
        if not (isinstance(triple, (list, tuple)) and len(triple) >= 2 and isinstance(triple[0], (int, float)) and isinstance(triple[1], int)):
            raise SpecsuiteError(f"padded-row scoring: {what}[{index}] holds {shorten(repr(triple), 60)}, not [logprob, id, text]")
        found[int(triple[1])] = float(triple[0])
    return found


def parse_padded_scoring(meta_info: dict[str, Any], count: int) -> list[PositionLogprobs]:
    """One entry per generated token from a `padded_scoring_request` answer; a one-line SpecsuiteError on another shape
    (a server that does not answer `token_ids_logprob` has no `input_token_ids_logprobs`)."""
    meta = MetaInfo.parse(meta_info)
    tops, padded = meta.input_top_logprobs, meta.input_token_ids_logprobs
    if not isinstance(padded, list):
        raise SpecsuiteError("padded-row scoring: the answer has no input_token_ids_logprobs (token_ids_logprob not supported)")
    if not isinstance(tops, list) or len(tops) != count + 1 or len(padded) != count + 1:
        raise SpecsuiteError(f"padded-row scoring: expected {count + 1} input logprob entries (the last prompt position and one per "
                             f"generated token), got {len(tops) if isinstance(tops, list) else 'no'} top and {len(padded)} per-id")
    return [PositionLogprobs(_pairs(tops[i], "input_top_logprobs", i), _pairs(padded[i], "input_token_ids_logprobs", i))
            for i in range(1, count + 1)]


def position_upper_bound(position: PositionLogprobs, temperature: float, top_p: float = 1.0, slack: float = DEFAULT_SLACK_NATS) -> float:
    """An upper bound of the probability that the sampler draws a judged padded id here (module docstring)."""
    if not position.padded:
        return 0.0
    others = [value for token, value in position.top.items() if token not in position.padded]
    best_padded = max(position.padded.values())
    if temperature <= 0:
        return 1.0 if not others or best_padded + 2 * slack >= max(others) else 0.0
    shift = max([best_padded + slack, *(v - slack for v in others)])  # keeps exp() finite
    if math.isinf(shift):
        return 0.0  # every returned logprob is -inf: no mass anywhere it could be read
    numerator = sum(math.exp((v + slack - shift) / temperature) for v in position.padded.values())
    rest = sum(math.exp((v - slack - shift) / temperature) for v in others)
    return min(1.0, numerator / (numerator + rest) / top_p)


@dataclass
class PaddedRowJudgement:
    """Observed judged padded ids against what the model allows (or against a reference arm's rate)."""

    observed: int
    tokens: int
    method: str  # "model mass", "reference rate", "greedy" (zero tolerance at T=0 without scoring) or "not judged"
    expected_upper: float | None = None  # model mass: sum of the per-position bounds
    reference_count: int | None = None
    reference_tokens: int | None = None
    p_value: float | None = None
    alpha: float = 0.001
    reason: str | None = None  # why it was not judged, in one line

    @property
    def failed(self) -> bool:
        return self.p_value is not None and self.p_value < self.alpha

    def describe(self) -> str:
        head = f"{self.observed} judged padded-row ids in {self.tokens} tokens"
        if self.method == "model mass":
            return (f"{head}; the model's own mass allows at most {self.expected_upper:.3g} expected; "
                    f"one-sided Poisson P(X >= {self.observed}) = {self.p_value:.3g} (alpha {self.alpha})")
        if self.method == "reference rate":
            return (f"{head}; speculation-off reference {self.reference_count} in {self.reference_tokens}; "
                    f"exact one-sided conditional binomial p = {self.p_value:.3g} (alpha {self.alpha})")
        if self.method == "greedy":
            return (f"{head} at T=0, where only the argmax is drawn and an untrained row is no trained model's argmax "
                    f"(zero tolerance where the server cannot score per-id logprobs: {self.reason})")
        return f"{head}; not judged: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def poisson_upper_tail(observed: int, expected: float) -> float:
    """P(X >= observed) for X ~ Poisson(expected); 1 for no events, 0 when events come with an expectation of 0."""
    if observed <= 0:
        return 1.0
    return float(stats.poisson.sf(observed - 1, expected)) if expected > 0 else 0.0


def judged_hits(ids: Sequence[int], vocab: VocabInfo) -> int:
    return sum(1 for t in ids if vocab.tokenizer_length <= t < vocab.vocab_size - 1)


Scorer = Callable[[Generation], list[PositionLogprobs]]


def judge_by_model_mass(generations: Sequence[Generation], vocab: VocabInfo, scorer: Scorer, *, temperature: float, top_p: float,
                        alpha: float, slack: float = DEFAULT_SLACK_NATS) -> PaddedRowJudgement:
    """Score every generation with judged padded ids possible (all in [0, vocab_size)) and test the count one-sided.
    Generations holding an id outside [0, vocab_size) are left out: the server cannot score them, and they fail the
    zero-tolerance test already."""
    observed = tokens = 0
    expected = 0.0
    for generation in generations:
        ids = generation.output_ids or []
        if any(not 0 <= t < vocab.vocab_size for t in ids):
            continue
        observed += judged_hits(ids, vocab)
        tokens += len(ids)
        expected += sum(position_upper_bound(p, temperature, top_p, slack) for p in scorer(generation))
    return PaddedRowJudgement(observed, tokens, "model mass", expected_upper=expected, p_value=poisson_upper_tail(observed, expected),
                              alpha=alpha)


def judge_by_reference_rate(observed: int, tokens: int, reference_count: int, reference_tokens: int, *, alpha: float) -> PaddedRowJudgement:
    """Exact one-sided conditional binomial test of the observed rate against a speculation-off arm's."""
    from specsuite.stats import rate_ratio_test

    if tokens <= 0 or reference_tokens <= 0:
        return PaddedRowJudgement(observed, tokens, "not judged", reason="no generated tokens in one of the arms", alpha=alpha)
    test = rate_ratio_test(observed, tokens, reference_count, reference_tokens, alternative="greater")
    return PaddedRowJudgement(observed, tokens, "reference rate", reference_count=reference_count, reference_tokens=reference_tokens,
                              p_value=test.p_value, alpha=alpha)


def score_padded(client: ServerClient, vocab: VocabInfo, generation: Generation) -> list[PositionLogprobs]:
    """One generation's padded-row scoring on `client` (its prompt ids, or the prompt tokenized there)."""
    prompt_ids = generation.prompt_ids if generation.prompt_ids is not None else client.tokenize(generation.prompt or "")
    output_ids = generation.output_ids or []
    answer = client.generate_request(padded_scoring_request(prompt_ids, output_ids, judged_padded_ids(vocab)))
    return parse_padded_scoring(answer.generations[0].meta_info, len(output_ids))


def judge_answers(client: ServerClient, vocab: VocabInfo, generations: Sequence[Generation], *, temperature: float, top_p: float,
                  alpha: float) -> PaddedRowJudgement:
    """A family's answers against the model's own mass for the judged padded rows. Scoring is needed only when some
    were drawn (P(X >= 0) = 1); a server that cannot score per-id logprobs leaves them not judged, with the reason."""
    observed = sum(judged_hits(g.output_ids or [], vocab) for g in generations)
    tokens = sum(len(g.output_ids or []) for g in generations)
    if observed == 0:
        return PaddedRowJudgement(0, tokens, "not judged", p_value=1.0, alpha=alpha, reason="none drawn")
    kind = kinds.kind_of_client(client)
    if not kind.scores_token_ids_logprob:
        return PaddedRowJudgement(observed, tokens, "not judged", alpha=alpha,
                                  reason=f"the server cannot score per-id logprobs ({kind.display_name} has no token_ids_logprob)")
    try:
        return judge_by_model_mass(generations, vocab, lambda g: score_padded(client, vocab, g), temperature=temperature, top_p=top_p,
                                   alpha=alpha)
    except SpecsuiteError as exc:
        return PaddedRowJudgement(observed, tokens, "not judged", alpha=alpha, reason=str(exc))
