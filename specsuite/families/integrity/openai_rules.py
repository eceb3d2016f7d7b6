"""Integrity checks on OpenAI-shaped answers: `/v1/completions` and `/v1/chat/completions`,
streamed or not, as SGLang 0.5.23 serves them.

The native rules of `specsuite.server.kinds.sglang.integrity_rules` need output ids, which an OpenAI answer carries only with
SGLang's `return_token_ids` (completions: `choices[i].token_ids`; chat, non-stream only:
`choices[i].response_token_ids`). Where a choice has them it is re-shaped as a native answer and
every native rule runs on it (completion count, finish against ids, budget, stop id / string,
retokenization). Without ids only the rules that need none run: the finish reason is one SGLang
sends, one logprob entry per generated token, and with a single choice `usage.completion_tokens`
against the budget and the logprobs. Rules that hold only for OpenAI answers:

- `usage.completion_tokens` is the sum over choices of their ids (usage is per request);
- completions logprobs: `tokens`, `token_logprobs` and `text_offset` are as long as the ids, and
  `top_logprobs` as long too when `logprobs > 0`, empty when `logprobs` is 0;
- a stream finishes each choice exactly once, on that choice's last chunk, and every choice appears.

Text rules are skipped where SGLang changes the text: `echo` (the prompt is prepended), chat
answers with reasoning or tool calls, and chat answers stopped by a string the request did not list
(a conversation template's own stop).
"""

from __future__ import annotations

import json
from typing import Any

from specsuite.server.integrity_rules import IntegrityContext, Violation
from specsuite.server.kinds.sglang.integrity_rules import check_response
from specsuite.server.native_answers import item_prompt_hash, stop_strings

COMPLETIONS, CHAT = "completions", "chat"
COMPLETIONS_DEFAULT_MAX_TOKENS = 16  # srt/entrypoints/openai/protocol.py: CompletionRequest.max_tokens
# The finish_reason Literals of protocol.py's CompletionResponseChoice and ChatCompletionResponseChoice
# (pinned by tests/sglang_contract/test_openai_shapes.py).
FINISH_TYPES = {COMPLETIONS: ("stop", "length", "content_filter", "abort"),
                CHAT: ("stop", "length", "tool_calls", "content_filter", "function_call", "abort")}
PARSER_FINISHES = ("tool_calls", "function_call")  # a parser rewrote the text; they name no id or string


def openai_budget(api: str, body: dict[str, Any]) -> int | None:
    """The request's max_new_tokens: completions default 16, chat none."""
    if api == CHAT:
        value = body.get("max_completion_tokens", body.get("max_tokens"))
    else:
        value = body.get("max_tokens", COMPLETIONS_DEFAULT_MAX_TOKENS)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def native_params(api: str, body: dict[str, Any]) -> dict[str, Any]:
    """The native sampling params an OpenAI body maps to (protocol.py: to_sampling_params)."""
    params: dict[str, Any] = {"max_new_tokens": openai_budget(api, body)}
    for native, openai in (("stop", "stop"), ("stop_token_ids", "stop_token_ids"), ("ignore_eos", "ignore_eos"),
                           ("min_new_tokens", "min_tokens"), ("no_stop_trim", "no_stop_trim"),
                           ("skip_special_tokens", "skip_special_tokens"), ("stop_regex", "stop_regex")):
        if body.get(openai) is not None:
            params[native] = body[openai]
    return params


def _expected_choices(api: str, body: dict[str, Any]) -> int | None:
    n = body.get("n", 1)
    n = n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 1
    if api == CHAT:
        return n
    prompt = body.get("prompt")
    if isinstance(prompt, list) and prompt and all(isinstance(p, (str, list)) for p in prompt):
        return n * len(prompt)
    return n


def _prompt_item(api: str, body: dict[str, Any], index: int, n: int) -> dict[str, Any]:
    prompt = body.get("prompt")
    if api == COMPLETIONS and isinstance(prompt, list) and prompt and all(isinstance(p, (str, list)) for p in prompt):
        prompt = prompt[min(index // n, len(prompt) - 1)]
    if api == CHAT:  # hashed as specsuite.server.openai_client hashes a chat Generation's prompt
        prompt = json.dumps(body.get("messages"), separators=(",", ":"), sort_keys=True)
    key = "input_ids" if isinstance(prompt, list) else "text"
    return {key: prompt, "sampling_params": native_params(api, body), "return_logprob": body.get("logprobs") not in (None, False)}


def _choice_ids(api: str, choice: dict[str, Any]) -> list[int] | None:
    ids = choice.get("token_ids" if api == COMPLETIONS else "response_token_ids")
    if isinstance(ids, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        return ids
    return None


def _choice_text(api: str, body: dict[str, Any], choice: dict[str, Any]) -> str | None:
    if api == COMPLETIONS:
        return None if body.get("echo") else choice.get("text")
    message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
    if message.get("reasoning_content") is not None or message.get("tool_calls"):
        return None
    return message.get("content") if isinstance(message.get("content"), str) else None


def _native_finish(kind: Any, matched: Any, ids: list[int]) -> Any:
    if kind == "length":
        return {"type": "length", "length": len(ids)}
    if kind == "stop":
        return {"type": "stop", "matched": matched}
    return {"type": kind} if kind is not None else None


def _shape_problem(api: str, choice: Any) -> str | None:
    if not isinstance(choice, dict) or not isinstance(choice.get("index"), int):
        return f"choice is not an object with an integer index: {choice!r:.80}"
    if api == COMPLETIONS and not isinstance(choice.get("text"), str):
        return f"choice {choice['index']} has no text string"
    if api == CHAT and not isinstance(choice.get("message"), dict):
        return f"choice {choice['index']} has no message object"
    return None


def _logprob_problems(api: str, body: dict[str, Any], choice: dict[str, Any], ids: list[int] | None) -> list[str]:
    logprobs = choice.get("logprobs")
    if logprobs is None:
        return []
    if not isinstance(logprobs, dict):
        return [f"logprobs is {type(logprobs).__name__}, not an object"]
    if api == CHAT:
        content = logprobs.get("content")
        if isinstance(content, list) and ids is not None and len(content) != len(ids):
            return [f"{len(content)} logprob entries for {len(ids)} output ids"]
        return []
    problems = []
    lengths = {key: len(logprobs[key]) for key in ("tokens", "token_logprobs", "text_offset") if isinstance(logprobs.get(key), list)}
    if len(set(lengths.values())) > 1:
        problems.append(f"logprobs lists differ in length: {lengths}")
    count = lengths.get("token_logprobs", lengths.get("tokens"))
    if ids is not None and count is not None and not body.get("echo") and count != len(ids):
        problems.append(f"{count} logprobs for {len(ids)} output ids")
    tops, asked = logprobs.get("top_logprobs"), body.get("logprobs")
    if isinstance(tops, list) and count is not None and not body.get("echo") and isinstance(asked, int):
        wanted = count if asked > 0 else 0
        if len(tops) != wanted:
            problems.append(f"{len(tops)} top_logprobs entries for {count} positions with logprobs={asked}")
    return problems


def _logprob_count(api: str, choice: dict[str, Any]) -> int | None:
    logprobs = choice.get("logprobs")
    if not isinstance(logprobs, dict):
        return None
    entries = logprobs.get("content") if api == CHAT else logprobs.get("token_logprobs")
    return len(entries) if isinstance(entries, list) else None


def check_openai(api: str, body: dict[str, Any], response: Any, context: IntegrityContext, streamed: bool = False) -> list[Violation]:
    """Every rule on a non-streamed OpenAI answer (`api`: "completions" or "chat"), or on what a
    stream adds up to (`streamed`)."""
    if not isinstance(response, dict) or not isinstance(response.get("choices"), list) or not response["choices"]:
        return [Violation("response_shape", f"{api} answer has no choices: {response!r:.80}")]
    rid = response.get("id") if isinstance(response.get("id"), str) else None
    choices = response["choices"]
    expected = _expected_choices(api, body)
    found: list[Violation] = []
    if expected is not None and len(choices) != expected:
        found.append(Violation("response_shape", f"{len(choices)} choices for {expected} requested", rid=rid))
    n = body.get("n", 1) if isinstance(body.get("n", 1), int) and body.get("n", 1) > 0 else 1
    usage = response.get("usage") if isinstance(response.get("usage"), dict) else {}
    reported = usage.get("completion_tokens")
    budget = openai_budget(api, body)
    all_ids: list[list[int]] = []
    for choice in choices:
        shape = _shape_problem(api, choice)
        if shape:
            found.append(Violation("response_shape", shape, rid=rid))
            continue
        item = _prompt_item(api, body, choice["index"], n)
        where = {"rid": rid, "prompt_hash": item_prompt_hash(item)}
        kind = choice.get("finish_reason")
        if kind not in FINISH_TYPES[api]:
            found.append(Violation("finish_reason", f"choice {choice['index']} finish_reason {kind!r} is not one of {FINISH_TYPES[api]}", **where))
            continue
        ids = _choice_ids(api, choice)
        found.extend(Violation("logprob_alignment", m, **where) for m in _logprob_problems(api, body, choice, ids))
        if ids is None:
            continue
        all_ids.append(ids)
        if kind in PARSER_FINISHES:
            continue
        text = _choice_text(api, body, choice)
        if (api == CHAT and kind == "stop" and isinstance(choice.get("matched_stop"), str)
                and choice["matched_stop"] not in stop_strings(item["sampling_params"])):
            # A conversation template adds its own stop strings (srt/entrypoints/openai/
            # serving_chat.py:1857-1970): a match the request did not list is not a finding.
            text = None
        native = {"text": text, "output_ids": ids,
                  "meta_info": {"id": rid, "finish_reason": _native_finish(kind, choice.get("matched_stop"), ids)}}
        found.extend(check_response(item, native, context))
    if isinstance(reported, int) and len(all_ids) == len(choices) and reported != sum(map(len, all_ids)):
        found.append(Violation("completion_tokens", f"usage.completion_tokens is {reported} but the choices have {sum(map(len, all_ids))} ids", rid=rid))
    if len(choices) == 1 and not all_ids and isinstance(reported, int):
        found.extend(_single_choice_count_rules(api, choices[0], reported, budget, rid, lossy_logprobs=streamed and api == CHAT))
    return found


def _single_choice_count_rules(api: str, choice: Any, reported: int, budget: int | None, rid: str | None,
                               lossy_logprobs: bool) -> list[Violation]:
    """Without ids, one choice's completion_tokens still meets its budget and its logprobs.

    `lossy_logprobs`: a chat stream drops the logprobs of a step whose text delta is empty (an
    EOS, a held-back stop prefix) on the plain path (srt/entrypoints/openai/serving_chat.py:
    1031-1057), so there the entries can only be at most completion_tokens."""
    if not isinstance(choice, dict):
        return []
    found = []
    if budget is not None and reported > budget:
        found.append(Violation("max_new_tokens", f"usage.completion_tokens {reported} exceeds max tokens {budget}", rid=rid))
    if budget is not None and choice.get("finish_reason") == "length" and reported != budget:
        found.append(Violation("finish_reason", f"length finish with {reported} completion tokens, max tokens is {budget}", rid=rid))
    count = _logprob_count(api, choice)
    if count is not None and (count > reported if lossy_logprobs else count != reported):
        found.append(Violation("logprob_alignment", f"{count} logprob entries for usage.completion_tokens {reported}", rid=rid))
    return found


# --------------------------------------------------------------------------- streams
def _merge_completion_delta(acc: dict[str, Any], delta: dict[str, Any]) -> None:
    acc["text"] += delta.get("text") or ""
    if isinstance(delta.get("token_ids"), list):
        acc["token_ids"] = (acc.get("token_ids") or []) + delta["token_ids"]
    logprobs = delta.get("logprobs")
    if isinstance(logprobs, dict):
        merged = acc.get("logprobs") or {"tokens": [], "token_logprobs": [], "text_offset": [], "top_logprobs": []}
        acc["logprobs"] = merged
        for key in merged:
            merged[key] += logprobs.get(key) or []


def _merge_chat_delta(acc: dict[str, Any], choice: dict[str, Any]) -> None:
    delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
    message = acc["message"]
    if isinstance(delta.get("content"), str):
        message["content"] = (message.get("content") or "") + delta["content"]
    if isinstance(delta.get("reasoning_content"), str):
        message["reasoning_content"] = (message.get("reasoning_content") or "") + delta["reasoning_content"]
    if delta.get("tool_calls"):
        message["tool_calls"] = (message.get("tool_calls") or []) + list(delta["tool_calls"])
    logprobs = choice.get("logprobs")
    if isinstance(logprobs, dict) and isinstance(logprobs.get("content"), list):
        acc["logprobs"] = acc.get("logprobs") or {"content": []}
        acc["logprobs"]["content"] += logprobs["content"]


def reassemble_openai_stream(api: str, chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """The non-stream answer a stream adds up to: per choice index the joined deltas (text or
    content, token ids, logprobs) and its finish; `usage` from the usage chunk, if any."""
    merged: dict[int, dict[str, Any]] = {}
    usage = None
    for chunk in chunks:
        if isinstance(chunk.get("usage"), dict):
            usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or not isinstance(choice.get("index"), int):
                continue
            if api == CHAT:
                acc = merged.setdefault(choice["index"], {"index": choice["index"], "message": {"role": "assistant", "content": None}, "logprobs": None})
                _merge_chat_delta(acc, choice)
            else:
                acc = merged.setdefault(choice["index"], {"index": choice["index"], "text": "", "logprobs": None})
                _merge_completion_delta(acc, choice)
            if choice.get("finish_reason") is not None:
                acc["finish_reason"], acc["matched_stop"] = choice["finish_reason"], choice.get("matched_stop")
    choices = [dict({"finish_reason": None}, **merged[index]) for index in sorted(merged)]
    rid = next((c.get("id") for c in chunks if isinstance(c.get("id"), str)), None)
    return {"id": rid, "choices": choices, "usage": usage}


def check_openai_stream(api: str, body: dict[str, Any], chunks: list[dict[str, Any]], context: IntegrityContext) -> list[Violation]:
    """The stream rules (one finish per choice, on its last chunk; every choice present), then
    every non-stream rule on what the stream adds up to."""
    found: list[Violation] = []
    positions: dict[int, list[tuple[int, bool]]] = {}
    for position, chunk in enumerate(chunks):
        for choice in chunk.get("choices") or []:
            index = choice.get("index") if isinstance(choice, dict) else None
            if not isinstance(index, int) or isinstance(index, bool):
                found.append(Violation("stream_index", f"chunk {position} has a choice without an integer index"))
                continue
            if "hidden_states" in choice or "hidden_states" in (choice.get("delta") or {}):
                continue  # sent after the finishes when asked for (serving_completions.py:397-420)
            positions.setdefault(index, []).append((position, choice.get("finish_reason") is not None))
    expected = _expected_choices(api, body)
    if expected is not None and sorted(positions) != list(range(expected)):
        found.append(Violation("stream_index", f"stream carried choice indexes {sorted(positions)[:8]} for {expected} choices"))
    for index, seen in sorted(positions.items()):
        finishes = [position for position, finished in seen if finished]
        if len(finishes) != 1:
            found.append(Violation("stream_finish", f"choice {index}: {len(finishes)} chunks carry a finish_reason, expected exactly 1"))
        elif finishes[0] != seen[-1][0]:
            found.append(Violation("stream_finish", f"choice {index}: finish_reason at stream position {finishes[0]}, before its last chunk at {seen[-1][0]}"))
    if any(v.check == "stream_index" for v in found):
        return found
    return found + check_openai(api, body, reassemble_openai_stream(api, chunks), context, streamed=True)

