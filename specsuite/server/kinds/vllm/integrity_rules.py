"""Integrity checks on vLLM 0.32's `/v1/completions` answers, streamed or not, as vLLM serves them.

These run on what vLLM really sent (`specsuite.server.kinds.vllm.client` translates afterwards). Each rule
is a fact of vLLM's source, with its place in docs/vllm_api_facts.md; where vLLM differs from
SGLang, the rule follows vLLM (a rule written for SGLang would be a false alarm here):

- `usage.completion_tokens` is the sum of `len(token_ids)` over the choices (completion/serving.py:598),
  EOS included; a stream's usage is the sum of its chunks' ids (:401, :445-451);
- `logprobs`: `tokens`, `token_logprobs` and `text_offset` are one per output id, the tokens are
  the ids (`token_id:<id>` with `return_tokens_as_token_ids`), `top_logprobs` holds at most N+1
  entries (the sampled token is always added, completion/serving.py:712-729);
- at most `max_tokens` ids, exactly that many on a `length` finish (v1/core/sched/utils.py:98-119);
- no EOS id before the last position unless `ignore_eos`, and nothing after a stop id: a step
  that accepted drafts past them is trimmed (scheduler.py:2506-2509); a `stop` finish with
  `stop_reason` None ends on EOS, one with an int ends on that id;
- a stop string: `stop_reason` is one of the requested strings and the text holds none of them
  (unless `include_stop_str_in_output`). The tokens that formed it stay in `token_ids`
  (detokenizer.py:144-154): the ids are not compared with the text;
- per-request speculation stats (`metrics.speculative_decoding`, v1/metrics/stats.py:397-420):
  accepted <= drafted, `mean_acceptance_length` = 1 + accepted / steps, the histogram sums to the
  steps, and the tokens cover the acceptance: completion_tokens is at least 1 + steps + accepted
  (the prefill token, then each step's accepted drafts and its bonus) minus the draft length
  (acceptance is counted before the last step is trimmed, scheduler.py:2113-2149). There is no
  upper bound: a step that drafted nothing (ngram without a match) is no spec step, as only steps
  with scheduled drafts are observed (scheduler.py:2113), yet it adds a token;
- a stream finishes each choice once, on its last chunk, and the spec stats come only in the
  final usage chunk (completion/serving.py:458-492).
"""

from __future__ import annotations

from typing import Any

from specsuite.server.integrity_rules import IntegrityContext, Violation
from specsuite.server.kinds.vllm.wire import TOKEN_AS_ID
from specsuite.server.native_answers import stop_strings

FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")  # v1/engine/__init__.py:36,48-69
TOLERANCE = 1e-9


def _stops(body: dict[str, Any]) -> list[str]:
    return stop_strings({"stop": body.get("stop")})


def _logprob_problems(body: dict[str, Any], choice: dict[str, Any], ids: list[int]) -> list[str]:
    logprobs = choice.get("logprobs")
    if logprobs is None or body.get("echo"):
        return []
    if not isinstance(logprobs, dict):
        return [f"logprobs is {type(logprobs).__name__}, not an object"]
    problems = []
    lengths = {key: len(logprobs[key]) for key in ("tokens", "token_logprobs", "text_offset") if isinstance(logprobs.get(key), list)}
    if any(length != len(ids) for length in lengths.values()):
        problems.append(f"logprob lists of lengths {lengths} for {len(ids)} output ids")
    tokens = logprobs.get("tokens") or []
    if body.get("return_tokens_as_token_ids"):
        named = [int(m.group(1)) if (m := TOKEN_AS_ID.match(str(t))) else None for t in tokens]
        wrong = [i for i, (a, b) in enumerate(zip(named, ids, strict=False)) if a != b]
        if wrong:
            problems.append(f"logprob token at position {wrong[0]} names id {named[wrong[0]]}, token_ids has {ids[wrong[0]]}")
    asked = body.get("logprobs")
    tops = logprobs.get("top_logprobs")
    if isinstance(asked, int) and isinstance(tops, list):
        wide = [i for i, top in enumerate(tops) if isinstance(top, dict) and len(top) > asked + 1]
        if wide:
            problems.append(f"top_logprobs at position {wide[0]} has {len(tops[wide[0]])} entries for logprobs={asked}")
    return problems


def _finish_problems(body: dict[str, Any], choice: dict[str, Any], ids: list[int], context: IntegrityContext) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    budget = body.get("max_tokens")
    reason, matched = choice.get("finish_reason"), choice.get("stop_reason")
    if isinstance(budget, int) and len(ids) > budget:
        found.append(("max_new_tokens", f"{len(ids)} ids for max_tokens {budget}"))
    if reason == "length" and isinstance(budget, int) and len(ids) != budget:
        found.append(("finish_reason", f"length finish with {len(ids)} ids, max_tokens is {budget}"))
    if not body.get("ignore_eos"):
        early = [i for i, token in enumerate(ids[:-1]) if token in context.eos_ids]
        if early:
            found.append(("stop_token", f"EOS id {ids[early[0]]} at position {early[0]} of {len(ids)}: ids follow it"))
    stop_ids = set(body.get("stop_token_ids") or [])
    early_stop = [i for i, token in enumerate(ids[:-1]) if token in stop_ids]
    if early_stop:
        found.append(("stop_token", f"stop id {ids[early_stop[0]]} at position {early_stop[0]} of {len(ids)}: ids follow it"))
    if reason == "stop" and ids:
        if matched is None and ids[-1] not in context.eos_ids:
            found.append(("finish_reason", f"stop finish on EOS, but the last id {ids[-1]} is no EOS id"))
        elif isinstance(matched, int) and not isinstance(matched, bool) and ids[-1] != matched:
            found.append(("stop_token", f"stopped on id {matched}, but the last id is {ids[-1]}"))
        elif isinstance(matched, str) and matched not in _stops(body):
            found.append(("stop_string", f"stop_reason {matched!r} is not a requested stop string"))
    text = choice.get("text")
    if isinstance(text, str) and not body.get("echo"):
        if body.get("include_stop_str_in_output"):
            if reason == "stop" and isinstance(matched, str) and not text.endswith(matched):
                found.append(("stop_string", f"include_stop_str_in_output, but the text does not end with {matched!r}"))
        else:
            left = [stop for stop in _stops(body) if stop in text]
            if left:
                found.append(("stop_string", f"the text still holds the stop string {left[0]!r}"))
    return found


def spec_problems(spec: Any, completion_tokens: int | None) -> list[str]:
    """The per-request speculation stats against themselves and the token count."""
    if not isinstance(spec, dict):
        return []
    steps, accepted, drafted = spec.get("num_spec_steps"), spec.get("num_accepted_draft_tokens"), spec.get("num_draft_tokens")
    k = spec.get("num_spec_tokens")
    if not all(isinstance(v, int) for v in (steps, accepted, drafted, k)):
        return [f"speculative_decoding counts are not integers: {spec!r:.100}"]
    problems = []
    if accepted > drafted or drafted > steps * k:
        problems.append(f"accepted {accepted}, drafted {drafted} over {steps} steps of {k}")
    mean = spec.get("mean_acceptance_length")
    if steps and isinstance(mean, (int, float)) and abs(mean - (1 + accepted / steps)) > TOLERANCE:
        problems.append(f"mean_acceptance_length {mean} is not 1 + {accepted}/{steps}")
    histogram = spec.get("acceptance_histogram")
    if isinstance(histogram, list) and (sum(histogram) != steps or sum(i * n for i, n in enumerate(histogram)) != accepted):
        problems.append(f"acceptance_histogram {histogram} does not add up to {steps} steps and {accepted} accepted")
    if isinstance(completion_tokens, int) and completion_tokens > 0 and completion_tokens < 1 + steps + accepted - k:
        problems.append(f"{completion_tokens} completion tokens cannot hold 1 + {steps} steps + {accepted} accepted drafts "
                        f"(at most {k} trimmed from the last step): acceptance over-reported")
    return problems


def check_vllm_completion(body: dict[str, Any], response: Any, context: IntegrityContext) -> list[Violation]:
    """Every rule on one non-streamed /v1/completions answer (or what a stream adds up to)."""
    if not isinstance(response, dict) or not isinstance(response.get("choices"), list) or not response["choices"]:
        return [Violation("response_shape", f"completions answer has no choices: {response!r:.80}")]
    rid = response.get("id") if isinstance(response.get("id"), str) else None
    found: list[Violation] = []
    total = 0
    for choice in response["choices"]:
        ids = choice.get("token_ids") if isinstance(choice, dict) else None
        if not isinstance(ids, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in ids):
            found.append(Violation("response_shape", f"choice without a token_ids list: {choice!r:.80}", rid=rid))
            continue
        if body.get("echo"):
            ids = ids[len(choice.get("prompt_token_ids") or []):]
        total += len(ids)
        if choice.get("finish_reason") not in FINISH_REASONS:
            found.append(Violation("finish_reason", f"finish_reason {choice.get('finish_reason')!r} is not one of {FINISH_REASONS}", rid=rid))
            continue
        found.extend(Violation("logprob_alignment", message, rid=rid) for message in _logprob_problems(body, choice, ids))
        if not body.get("echo"):
            found.extend(Violation(check, message, rid=rid) for check, message in _finish_problems(body, choice, ids, context))
    usage = response.get("usage") if isinstance(response.get("usage"), dict) else {}
    reported = usage.get("completion_tokens")
    if isinstance(reported, int) and not body.get("echo") and reported != total:
        found.append(Violation("completion_tokens", f"usage.completion_tokens is {reported} but the choices have {total} ids", rid=rid))
    metrics = response.get("metrics") if isinstance(response.get("metrics"), dict) else {}
    found.extend(Violation("spec_counts", message, rid=rid) for message in spec_problems(metrics.get("speculative_decoding"), reported))
    return found


def reassemble_vllm_stream(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """The answer a stream adds up to: per choice the joined text, ids and logprobs; usage and
    metrics from the chunks that carry them."""
    merged: dict[int, dict[str, Any]] = {}
    usage, metrics = None, None
    for chunk in chunks:
        usage = chunk["usage"] if isinstance(chunk.get("usage"), dict) else usage
        metrics = chunk["metrics"] if isinstance(chunk.get("metrics"), dict) else metrics
        for choice in chunk.get("choices") or []:
            acc = merged.setdefault(choice.get("index", 0), {"index": choice.get("index", 0), "text": "", "token_ids": [], "logprobs": None,
                                                            "finish_reason": None, "stop_reason": None})
            acc["text"] += choice.get("text") or ""
            acc["token_ids"] += choice.get("token_ids") or []
            acc["prompt_token_ids"] = acc.get("prompt_token_ids") or choice.get("prompt_token_ids")
            if isinstance(choice.get("logprobs"), dict):
                joined = acc["logprobs"] or {"tokens": [], "token_logprobs": [], "text_offset": [], "top_logprobs": []}
                acc["logprobs"] = joined
                for key in joined:
                    joined[key] += choice["logprobs"].get(key) or []
            if choice.get("finish_reason") is not None:
                acc["finish_reason"], acc["stop_reason"] = choice["finish_reason"], choice.get("stop_reason")
    rid = next((c.get("id") for c in chunks if isinstance(c.get("id"), str)), None)
    return {"id": rid, "choices": [merged[i] for i in sorted(merged)], "usage": usage, "metrics": metrics}


def check_vllm_stream(body: dict[str, Any], chunks: list[dict[str, Any]], context: IntegrityContext) -> list[Violation]:
    """Stream rules (one finish per choice, on its last chunk; spec stats only after the last
    finish), then every answer rule on what the stream adds up to."""
    found: list[Violation] = []
    last_seen: dict[int, int] = {}
    finishes: dict[int, list[int]] = {}
    for position, chunk in enumerate(chunks):
        if chunk.get("metrics") and chunk.get("choices"):
            found.append(Violation("stream_finish", f"chunk {position} carries metrics beside choices, not in the final usage chunk"))
        for choice in chunk.get("choices") or []:
            index = choice.get("index", 0)
            last_seen[index] = position
            if choice.get("finish_reason") is not None:
                finishes.setdefault(index, []).append(position)
    for index, last in sorted(last_seen.items()):
        seen = finishes.get(index, [])
        if len(seen) != 1:
            found.append(Violation("stream_finish", f"choice {index}: {len(seen)} chunks carry a finish_reason, expected exactly 1"))
        elif seen[0] != last:
            found.append(Violation("stream_finish", f"choice {index}: finish_reason at chunk {seen[0]}, before its last chunk {last}"))
    return found + check_vllm_completion(body, reassemble_vllm_stream(chunks), context)
