"""The fault proxy's faults on vLLM's OpenAI shapes: `/v1/completions` answers, plain JSON and SSE.

`tests/helpers/fault_proxy.py` serves both APIs (one proxy, one forwarding and SSE relay); this
module holds only what breaks a `/v1/completions` answer. The shapes are vLLM 0.32's (see
docs/vllm_api_facts.md): each choice has `token_ids` (with `return_token_ids`) and, when asked,
`logprobs` whose `tokens` name the ids (`token_id:<id>` with `return_tokens_as_token_ids`);
`usage` and `metrics.speculative_decoding` belong to the request. A stream sends each choice's new
ids per chunk (several when drafts were accepted), its `finish_reason` on the last chunk of the
choice, then one usage-only chunk with `usage` and `metrics`.

Each fault is aimed at one check and keeps everything else consistent, so that only the owning
check can see it:

- `padded_id`: one generated id becomes a padded-row id (default 8120: >= the tokenizer's 8100
  ids, < vocab_size 8128), and its logprob token names it too (the ids agree with the logprob ids,
  so only the padded-row / invalid-id detectors see it);
- `accept_inflate`: k + 1 more accepted drafts, moved up the acceptance histogram (and
  `per_step_accepted`), `mean_acceptance_length` and `draft_acceptance_rate` recomputed: only the
  token count (completion tokens vs 1 + steps + accepted) can disprove it (`spec_counts`);
- `eos_tail`: two ids after the EOS / stop id that finished the answer, with usage, logprobs and
  the spec stats (two more steps that accepted nothing) grown to match (`stop_token`);
- `completion_off_by_one`: `usage.completion_tokens` one too high (`completion_tokens`);
- `swap_chunks` (streams): the second and third content chunks of a stream change places; every
  count still adds up, but the stream no longer reassembles into the non-streamed answer.
"""

from __future__ import annotations

import copy
from typing import Any

PADDED_ID = 8120  # specsuite/fixtures/vllm_models/target: tokenizer 8100 ids, vocab_size 8128 (not 8127, the fallback id)
TAIL = 2
OPENAI_FAULTS = ("padded_id", "accept_inflate", "eos_tail", "completion_off_by_one", "swap_chunks")


def _token(token_id: int) -> str:
    return f"token_id:{token_id}"


def _spec(metrics: Any) -> dict[str, Any] | None:
    spec = metrics.get("speculative_decoding") if isinstance(metrics, dict) else None
    return spec if isinstance(spec, dict) and isinstance(spec.get("num_spec_steps"), int) and spec["num_spec_steps"] > 0 else None


def _restate(spec: dict[str, Any]) -> None:
    """Recompute the derived fields as vLLM does (v1/metrics/stats.py:397-420)."""
    steps, accepted, drafted = spec["num_spec_steps"], spec["num_accepted_draft_tokens"], spec["num_draft_tokens"]
    spec["mean_acceptance_length"] = 1 + accepted / steps
    if "draft_acceptance_rate" in spec:
        spec["draft_acceptance_rate"] = accepted / drafted if drafted else 0.0


# --------------------------------------------------------------------------- one answer
# An answer is seen as (choice, usage, metrics): a plain answer's choice and its request's usage and
# metrics, or a stream's final choice chunk with the usage chunk's usage and metrics.


def _logprob_lists(choice: dict[str, Any]) -> dict[str, Any] | None:
    logprobs = choice.get("logprobs")
    return logprobs if isinstance(logprobs, dict) and isinstance(logprobs.get("tokens"), list) else None


def replace_id(choice: dict[str, Any], position: int, new_id: int) -> None:
    """Put `new_id` at `position` of the choice's token_ids, and name it in the logprobs."""
    old = choice["token_ids"][position]
    choice["token_ids"][position] = new_id
    logprobs = _logprob_lists(choice)
    if logprobs is None or position >= len(logprobs["tokens"]):
        return
    if logprobs["tokens"][position] == _token(old):
        logprobs["tokens"][position] = _token(new_id)
    tops = logprobs.get("top_logprobs")
    if isinstance(tops, list) and position < len(tops) and isinstance(tops[position], dict) and _token(old) in tops[position]:
        tops[position][_token(new_id)] = tops[position].pop(_token(old))


def append_ids(choice: dict[str, Any], usage: dict[str, Any] | None, metrics: Any, count: int, filler: int) -> None:
    """Append `count` copies of `filler` (a generated id), with logprobs, usage and spec stats to
    match (the spec stats gain `count` steps that accepted nothing, so the token count adds up)."""
    choice["token_ids"].extend([filler] * count)
    logprobs = _logprob_lists(choice)
    if logprobs is not None and logprobs["tokens"]:
        logprobs["tokens"].extend([_token(filler)] * count)
        for key in ("token_logprobs", "text_offset"):
            if isinstance(logprobs.get(key), list) and logprobs[key]:
                logprobs[key].extend([logprobs[key][-1]] * count)
        tops = logprobs.get("top_logprobs")
        if isinstance(tops, list) and tops:
            value = (logprobs.get("token_logprobs") or [0.0])[-1]
            tops.extend([{_token(filler): value} for _ in range(count)])
    if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
        usage["completion_tokens"] += count
        if isinstance(usage.get("total_tokens"), int):
            usage["total_tokens"] += count
    spec = _spec(metrics)
    if spec is not None:
        spec["num_spec_steps"] += count
        spec["num_draft_tokens"] += count * spec["num_spec_tokens"]
        if isinstance(spec.get("acceptance_histogram"), list) and spec["acceptance_histogram"]:
            spec["acceptance_histogram"][0] += count
        for key, value in (("per_step_accepted", 0), ("per_step_drafted", spec["num_spec_tokens"])):
            if isinstance(spec.get(key), list):
                spec[key].extend([value] * count)
        _restate(spec)


def inflate_acceptance(spec: dict[str, Any], extra: int) -> bool:
    """`extra` more accepted drafts, each a step moved one bucket up the histogram; False (and
    nothing changed) when the steps cannot hold that many more."""
    histogram, k = spec.get("acceptance_histogram"), spec["num_spec_tokens"]
    if not isinstance(histogram, list) or spec["num_accepted_draft_tokens"] + extra > spec["num_draft_tokens"]:
        return False
    histogram = list(histogram)
    per_step = list(spec["per_step_accepted"]) if isinstance(spec.get("per_step_accepted"), list) else None
    for _ in range(extra):
        bucket = next((j for j in range(k) if histogram[j] > 0), None)
        if bucket is None:
            return False
        histogram[bucket] -= 1
        histogram[bucket + 1] += 1
        if per_step is not None and bucket in per_step:
            per_step[per_step.index(bucket)] += 1
    spec["acceptance_histogram"] = histogram
    if per_step is not None:
        spec["per_step_accepted"] = per_step
    spec["num_accepted_draft_tokens"] += extra
    _restate(spec)
    return True


def _qualifies(fault: str, body: dict[str, Any], choice: dict[str, Any], metrics: Any) -> bool:
    ids = choice.get("token_ids")
    if not isinstance(ids, list) or not ids or body.get("echo"):
        return False
    if fault == "padded_id":
        return len(ids) >= 3
    if fault == "eos_tail":
        stop_reason = choice.get("stop_reason")
        return choice.get("finish_reason") == "stop" and (stop_reason is None or isinstance(stop_reason, int))
    if fault == "accept_inflate":
        return _spec(metrics) is not None
    return True


def break_answer(fault: str, choice: dict[str, Any], usage: dict[str, Any] | None, metrics: Any, padded_id: int = PADDED_ID,
                 filler: int | None = None) -> bool:
    """Apply an answer fault to one finished answer, in place; False when it did not apply.
    `filler` is the id `eos_tail` appends (default: the one before the last)."""
    ids = choice["token_ids"]
    if fault == "padded_id":
        replace_id(choice, len(ids) // 2, padded_id)
    elif fault == "eos_tail":
        append_ids(choice, usage, metrics, TAIL, filler if filler is not None else ids[-2] if len(ids) >= 2 else ids[-1])
    elif fault == "completion_off_by_one":
        if not isinstance(usage, dict) or not isinstance(usage.get("completion_tokens"), int):
            return False
        usage["completion_tokens"] += 1
    elif fault == "accept_inflate":
        spec = _spec(metrics)
        return spec is not None and inflate_acceptance(spec, spec["num_spec_tokens"] + 1)
    else:
        return False
    return True


# --------------------------------------------------------------------------- whole responses


def break_completion(fault: str | None, body: dict[str, Any], response: Any, padded_id: int = PADDED_ID) -> int:
    """Break the first qualifying choice of a non-streamed answer, in place; the mutation count."""
    choices = response.get("choices") if isinstance(response, dict) else None
    if fault not in OPENAI_FAULTS or not isinstance(choices, list):
        return 0
    for choice in choices:
        if isinstance(choice, dict) and _qualifies(fault, body, choice, response.get("metrics")):
            return int(break_answer(fault, choice, response.get("usage"), response.get("metrics"), padded_id))
    return 0


def _content_positions(chunks: list[dict[str, Any]]) -> list[int]:
    """Chunks that add ids to choice 0 without finishing it."""
    return [p for p, chunk in enumerate(chunks)
            if any(c.get("index", 0) == 0 and c.get("token_ids") and c.get("finish_reason") is None for c in chunk.get("choices") or [])]


def break_completion_stream(fault: str | None, body: dict[str, Any], chunks: list[dict[str, Any]],
                            padded_id: int = PADDED_ID) -> tuple[list[dict[str, Any]], int]:
    """The stream's chunks with the fault applied to choice 0 (copies), and the mutation count."""
    if fault not in OPENAI_FAULTS:
        return chunks, 0
    chunks = [copy.deepcopy(chunk) for chunk in chunks]
    usage_chunk = next((c for c in reversed(chunks) if isinstance(c.get("usage"), dict)), None)
    usage = usage_chunk["usage"] if usage_chunk is not None else None
    metrics = usage_chunk.get("metrics") if usage_chunk is not None else None
    content = _content_positions(chunks)
    if fault == "swap_chunks":
        movable = [p for p in content[1:] if not chunks[p].get("usage")]
        if len(movable) < 2:
            return chunks, 0
        first, second = movable[0], movable[1]
        chunks[first], chunks[second] = chunks[second], chunks[first]
        return chunks, 1
    if fault == "padded_id":  # the middle id of a chunk in the middle of the stream
        if not content:
            return chunks, 0
        choice = next(c for c in chunks[content[len(content) // 2]]["choices"] if c.get("index", 0) == 0)
        replace_id(choice, len(choice["token_ids"]) // 2, padded_id)
        return chunks, 1
    final = next((c for chunk in reversed(chunks) for c in chunk.get("choices") or []
                  if c.get("index", 0) == 0 and c.get("finish_reason") is not None), None)
    if final is None or not final.get("token_ids"):
        return chunks, 0
    # the stream's ids decide whether it qualifies (and the filler); the final chunk is what changes
    ids = [t for chunk in chunks for c in chunk.get("choices") or [] if c.get("index", 0) == 0 for t in c.get("token_ids") or []]
    if not _qualifies(fault, body, {**final, "token_ids": ids}, metrics):
        return chunks, 0
    filler = ids[-2] if len(ids) >= 2 else ids[-1]
    return chunks, int(break_answer(fault, final, usage, metrics, padded_id, filler))
