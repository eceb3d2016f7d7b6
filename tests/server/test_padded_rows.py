"""Padded-row ids judged against the model's own mass (specsuite/families/correctness/padded_rows.py).

A stand-in SGLang server with a bigram model over 110 ids (tokenizer length 100, judged padded rows 100..108, fallback
109) gives its padded rows 0.2 % of the mass at T=1 and answers scoring requests with `token_ids_logprob` as SGLang
does. Emitting them at the model's own rate must pass; at 5x that rate it must fail. The per-position bound must never
fall below the exact padded mass of the sampling distribution at T and top_p.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from specsuite.families.correctness.padded_rows import (
    PositionLogprobs,
    judge_by_model_mass,
    judge_by_reference_rate,
    judged_padded_ids,
    padded_scoring_request,
    parse_padded_scoring,
    poisson_upper_tail,
    position_upper_bound,
)
from specsuite.server.generation import Generation, prompt_hash
from specsuite.server.vocab import VocabInfo
from tests.helpers.native_fake import NativeFake

TOKENIZER_LENGTH, VOCAB_SIZE = 100, 110
PADDED_MASS = 2e-3  # the model's own padded mass per position at T=1
SEED = 20261206


def _vocab() -> VocabInfo:
    return VocabInfo(tokenizer_length=TOKENIZER_LENGTH, vocab_size=VOCAB_SIZE, eos_ids=frozenset(), special_ids=frozenset(),
                     empty_decoding_ids=frozenset(), token0_text="!")


def _log_softmax(row: np.ndarray) -> np.ndarray:
    top = row.max()
    return row - top - math.log(np.exp(row - top).sum())


def _sampling_probs(logits: np.ndarray, temperature: float, top_p: float) -> np.ndarray:
    """SGLang's order: temperature, then the nucleus (ids whose preceding cumulative mass is below top_p)."""
    probs = np.exp(_log_softmax(logits / temperature))
    order = np.argsort(-probs, kind="stable")
    cumulative = np.cumsum(probs[order])
    keep = np.zeros_like(probs, dtype=bool)
    keep[order[(cumulative - probs[order]) < top_p]] = True
    probs = np.where(keep, probs, 0.0)
    return probs / probs.sum()


class BigramServer(NativeFake):
    """Generates from a bigram model, drawing judged padded rows at `boost` times the model's rate; scores with the
    model's own raw logprobs (top-K and the requested ids), the first entry null."""

    def __init__(self, boost: float = 1.0, seed: int = SEED) -> None:
        rng = np.random.default_rng(seed)
        logits = rng.normal(0.0, 2.0, size=(VOCAB_SIZE, VOCAB_SIZE))
        real = logits[:, :TOKENIZER_LENGTH]
        lse = np.log(np.exp(real).sum(axis=1))
        padded = len(judged_padded_ids(_vocab()))
        logits[:, TOKENIZER_LENGTH:VOCAB_SIZE - 1] = (lse + math.log(PADDED_MASS / (padded * (1 - PADDED_MASS))))[:, None]
        logits[:, VOCAB_SIZE - 1] = -1e4  # the fallback: never drawn by a correct sampler
        self.logits, self.boost, self.rng = logits, boost, np.random.default_rng(seed + 1)

    def generate(self, payload: dict[str, Any]) -> Any:
        ids = list(payload["input_ids"])
        params = payload["sampling_params"]
        if params["max_new_tokens"] == 0:
            return self._score(ids, payload)
        out = []
        for _ in range(params["max_new_tokens"]):
            probs = _sampling_probs(self.logits[(out or ids)[-1]], params.get("temperature", 1.0), params.get("top_p", 1.0))
            probs[TOKENIZER_LENGTH:VOCAB_SIZE - 1] *= self.boost
            out.append(int(self.rng.choice(VOCAB_SIZE, p=probs / probs.sum())))
        return {"text": "", "output_ids": out, "meta_info": {"completion_tokens": len(out), "finish_reason": {"type": "length"}}}

    def _score(self, ids: list[int], payload: dict[str, Any]) -> Any:
        start, k, wanted = payload["logprob_start_len"], payload["top_logprobs_num"], payload["token_ids_logprob"]
        tops: list[Any] = [None]
        per_id: list[Any] = [None]
        for position in range(start + 1, len(ids)):
            row = _log_softmax(self.logits[ids[position - 1]])
            best = np.argsort(-row, kind="stable")[:k]
            tops.append([[float(row[t]), int(t), None] for t in best])
            per_id.append([[float(row[t]), int(t), None] for t in wanted])
        return {"text": "", "output_ids": [], "meta_info": {"input_top_logprobs": tops, "input_token_ids_logprobs": per_id}}


def _generations(server: BigramServer, temperature: float, top_p: float, prompts: int = 48, tokens: int = 200) -> list[Generation]:
    out = []
    for index in range(prompts):
        prompt = [index % TOKENIZER_LENGTH, (7 * index) % TOKENIZER_LENGTH]
        payload = {"input_ids": prompt, "sampling_params": {"max_new_tokens": tokens, "temperature": temperature, "top_p": top_p}}
        answer = server.generate(payload)
        out.append(Generation(prompt=None, prompt_ids=prompt, prompt_hash=prompt_hash(None, prompt), params=payload["sampling_params"],
                              output_ids=answer["output_ids"], text=""))
    return out


def _judge(server: BigramServer, temperature: float, top_p: float):
    vocab = _vocab()

    def score(generation: Generation) -> list[PositionLogprobs]:
        request = padded_scoring_request(generation.prompt_ids, generation.output_ids, judged_padded_ids(vocab))
        answer = server.generate_request(request)  # native_payload puts token_ids_logprob on the wire
        assert answer.wire["token_ids_logprob"] == list(range(100, 109))
        return parse_padded_scoring(answer.generations[0].meta_info, len(generation.output_ids))

    return judge_by_model_mass(_generations(server, temperature, top_p), vocab, score, temperature=temperature, top_p=top_p, alpha=0.001)


@pytest.mark.parametrize(("temperature", "top_p"), [(1.0, 1.0), (0.8, 1.0)])
def test_padded_rows_at_the_models_own_rate_pass(temperature, top_p):
    judgement = _judge(BigramServer(boost=1.0), temperature, top_p)
    assert judgement.observed > 0 and judgement.method == "model mass"
    assert not judgement.failed, judgement.describe()
    print(judgement.describe())


@pytest.mark.parametrize(("temperature", "top_p"), [(1.0, 1.0), (0.8, 1.0)])
def test_padded_rows_at_five_times_the_models_rate_fail(temperature, top_p):
    judgement = _judge(BigramServer(boost=5.0), temperature, top_p)
    assert judgement.failed, judgement.describe()
    print(judgement.describe())


def test_the_bound_never_falls_below_the_exact_mass():
    rng = np.random.default_rng(SEED)
    server = BigramServer()
    padded = judged_padded_ids(_vocab())
    for _ in range(200):
        logits = server.logits[int(rng.integers(TOKENIZER_LENGTH))].copy()
        logits[padded] += rng.normal(0, 3)  # padded rows anywhere from rare to likely
        raw = _log_softmax(logits)
        top = {int(t): float(raw[t]) for t in np.argsort(-raw)[:20]}
        position = PositionLogprobs(top, {t: float(raw[t]) for t in padded})
        for temperature in (0.4, 0.7, 1.0, 1.5):
            for top_p in (0.8, 0.95, 1.0):
                exact = float(_sampling_probs(logits, temperature, top_p)[padded].sum())
                assert position_upper_bound(position, temperature, top_p, slack=0.0) >= exact - 1e-12


def test_greedy_bound_is_the_argmax_indicator():
    position = PositionLogprobs({1: -0.1, 2: -3.0}, {100: -5.0})
    assert position_upper_bound(position, 0.0) == 0.0
    assert position_upper_bound(PositionLogprobs({1: -0.7}, {100: -0.69}), 0.0) == 1.0


def test_poisson_tail_and_reference_rate():
    assert poisson_upper_tail(0, 0.0) == 1.0 and poisson_upper_tail(1, 0.0) == 0.0
    assert poisson_upper_tail(1, 1.0) == pytest.approx(1 - math.exp(-1))
    # 1 in 38,400 against the speculation-off arm's 1 in 38,400 (SGLang 0.5.17, H100): not above it.
    assert not judge_by_reference_rate(1, 38_400, 1, 38_400, alpha=0.001).failed
    assert judge_by_reference_rate(40, 38_400, 1, 38_400, alpha=0.001).failed


def test_a_server_without_token_ids_logprob_is_one_line():
    from specsuite.errors import SpecsuiteError

    with pytest.raises(SpecsuiteError, match="no input_token_ids_logprobs"):
        parse_padded_scoring({"input_top_logprobs": [None, [[-0.1, 1, None]]]}, 1)


@pytest.fixture(scope="module")
def padded_refserver(tmp_path_factory):
    """The reference server (fix arm) whose padded rows other than the fallback get mass of their own (test knob)."""
    from specsuite.server.launcher import launch_reference_server

    with launch_reference_server("fix", tmp_path_factory.mktemp("padded"), ("--padded-row-logit-gap", "-10"), ready_timeout_s=120) as server:
        yield server.base_url


def test_the_reference_server_scores_padded_ids_as_sglang_does(padded_refserver):
    from specsuite.server.kinds.sglang.client import SGLangClient
    from specsuite.server.protocol import GenerationRequest, Sampling

    vocab = VocabInfo(tokenizer_length=8100, vocab_size=8128, eos_ids=frozenset(), special_ids=frozenset(), empty_decoding_ids=frozenset(),
                      token0_text="!")
    with SGLangClient(padded_refserver, timeout_s=60.0) as client:
        prompt = client.tokenize("The river is wide and the old mill stands by it.")
        generations = [client.generate_request(GenerationRequest(prompt_ids=tuple(prompt), sampling=Sampling(
            temperature=1.0, max_new_tokens=96, seed=SEED + i))).generations[0] for i in range(8)]

        def score(generation: Generation) -> list[PositionLogprobs]:
            request = padded_scoring_request(prompt, generation.output_ids, judged_padded_ids(vocab))
            answer = client.generate_request(request)
            return parse_padded_scoring(answer.generations[0].meta_info, len(generation.output_ids))

        positions = score(generations[0])
        assert len(positions) == len(generations[0].output_ids)
        assert all(sorted(p.padded) == list(range(8100, 8127)) and len(p.top) == 20 for p in positions)
        judgement = judge_by_model_mass(generations, vocab, score, temperature=1.0, top_p=1.0, alpha=0.001)
    assert judgement.observed > 0 and judgement.expected_upper > 0 and not judgement.failed, judgement.describe()
