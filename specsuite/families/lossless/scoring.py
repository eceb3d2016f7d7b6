"""The scoring request: the target's own distribution at every generated position.

A generated continuation is sent back as part of the prompt (prompt ids = prompt + output) with
`max_new_tokens` 0, logprobs, `logprob_start` = the prompt length and `top_logprobs` K (on the
wire SGLang's `return_logprob`, `logprob_start_len`, `top_logprobs_num`). Prefill never speculates, so
what comes back is the target's own distribution at each generated position, and it is the raw one,
log_softmax(logits), before temperature, top-p and top-k, whatever the request's sampling parameters:
SGLang computes input logprobs in its logits processor, apart from the sampler, and vLLM from the raw
logits (docs/logprob_semantics.md, pinned by tests/sglang_contract/test_logprob_semantics.py). The
request therefore carries temperature 1, the distribution it gets back.
SGLang reports the first entry from `logprob_start_len` as null, which is position 1 (the token
sampled in prefill): only positions ≥ 2 get a distribution, and those are the ones speculation
produces.

The reported logprobs of the generation itself are not used: they come from the server's verify
path, which a bug can corrupt together with the sample.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from specsuite.errors import SpecsuiteError
from specsuite.server.generation import Generation
from specsuite.server.meta_info import MetaInfo, meta_info_of
from specsuite.server.protocol import GenerationRequest, Sampling
from specsuite.server.transport import shorten


@dataclass(frozen=True)
class ScoredPosition:
    """The target's top-K at one generated position, most likely first, and the token drawn there.

    `token_logprob` is the drawn token's own logprob (None when the server gave none).
    """

    token_id: int
    top_ids: tuple[int, ...]
    top_logprobs: tuple[float, ...]
    token_logprob: float | None

    @property
    def top_probs(self) -> list[float]:
        return [math.exp(value) for value in self.top_logprobs]


def scoring_request(prompt_ids: list[int], output_ids: list[int], top_k: int) -> GenerationRequest:
    """Prefill-only request scoring `output_ids` as prompt: the raw top-K logprobs of every position
    from the end of the prompt on."""
    return GenerationRequest(prompt_ids=(*prompt_ids, *output_ids), sampling=Sampling(temperature=1.0, max_new_tokens=0),
                             logprobs=True, top_logprobs=top_k, logprob_start=len(prompt_ids))


def parse_scoring(answer: Generation | Any, output_ids: list[int]) -> list[ScoredPosition | None]:
    """One entry per generated token: None at position 1 (SGLang's null first entry), else the
    target's top-K there. `answer`: the scoring request's Generation (or a raw native /generate
    answer, as the contract tests post it). Raises a one-line SpecsuiteError on the wrong shape."""
    meta = answer.meta_info if isinstance(answer, Generation) else meta_info_of(answer)
    if not isinstance(meta, dict):
        raise SpecsuiteError("scoring request: the /generate result has no meta_info object")
    parsed = MetaInfo.parse(meta)
    tops, tokens = parsed.input_top_logprobs, parsed.input_token_logprobs
    if not isinstance(tops, list) or len(tops) != len(output_ids):
        count = len(tops) if isinstance(tops, list) else "no"
        raise SpecsuiteError(
            f"scoring request: expected {len(output_ids)} input_top_logprobs entries (one per generated token), got {count}"
        )
    if not isinstance(tokens, list) or len(tokens) != len(output_ids):
        raise SpecsuiteError(f"scoring request: input_token_logprobs does not have {len(output_ids)} entries")
    positions: list[ScoredPosition | None] = [None]
    for index in range(1, len(output_ids)):
        positions.append(_position(output_ids[index], tops[index], tokens[index], index))
    return positions


def _position(token_id: int, top: Any, token_entry: Any, index: int) -> ScoredPosition:
    if not isinstance(top, list) or not top:
        raise SpecsuiteError(f"scoring request: input_top_logprobs[{index}] is {shorten(repr(top), 60)}, not a list of triples")
    ids, logprobs = [], []
    for triple in top:
        if not (isinstance(triple, list) and len(triple) >= 2 and isinstance(triple[0], (int, float)) and isinstance(triple[1], int)):
            raise SpecsuiteError(f"scoring request: input_top_logprobs[{index}] holds {shorten(repr(triple), 60)}, not [logprob, id, text]")
        logprobs.append(float(triple[0]))
        ids.append(triple[1])
    own = token_entry[0] if isinstance(token_entry, list) and token_entry else None
    return ScoredPosition(token_id, tuple(ids), tuple(logprobs), float(own) if isinstance(own, (int, float)) else None)
