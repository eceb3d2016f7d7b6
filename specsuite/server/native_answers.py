"""The native /generate vocabulary read back: the request items a native payload produces (one per result, prompt-major),
what a native stream adds up to, the stop strings a request asked for, and where the native stop check first sees one.

SGLang speaks this vocabulary natively; the other kinds answer it through their adapters (specsuite/server/kinds/).
The integrity rules of every kind, the OpenAI-route rules and the integrity suite read answers through these helpers.
"""

from __future__ import annotations

from typing import Any

from specsuite.server.generation import prompt_hash
from specsuite.server.integrity_rules import IntegrityContext


def split_payload(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """One request item per response object a native /generate payload produces.

    Item = {"text" or "input_ids", "sampling_params": dict, "return_logprob": bool}. A batch (text
    list, input_ids list of lists) and n>1 both answer prompt-major: item k belongs to prompt k // n.
    """
    prompts, key = _prompts(payload)
    params = payload.get("sampling_params") or {}
    params_list = params if isinstance(params, list) else [params] * len(prompts)
    logprob = payload.get("return_logprob", False)
    logprob_list = logprob if isinstance(logprob, list) else [logprob] * len(prompts)
    first = params_list[0] if params_list and isinstance(params_list[0], dict) else {}
    n = first.get("n", 1)
    n = n if isinstance(n, int) and n > 0 else 1
    items = []
    for index, prompt in enumerate(prompts):
        item_params = params_list[index] if index < len(params_list) and isinstance(params_list[index], dict) else {}
        item_logprob = bool(logprob_list[index]) if index < len(logprob_list) else False
        items.extend({key: prompt, "sampling_params": item_params, "return_logprob": item_logprob} for _ in range(n))
    return items


def is_batch_payload(payload: dict[str, Any]) -> bool:
    """True when SGLang answers this payload with a list (and streams chunks with `index`)."""
    text, ids = payload.get("text"), payload.get("input_ids")
    params = payload.get("sampling_params") or {}
    first = params[0] if isinstance(params, list) and params else params
    n = first.get("n", 1) if isinstance(first, dict) else 1
    if text is not None:
        return isinstance(text, list) or n != 1
    return (isinstance(ids, list) and bool(ids) and isinstance(ids[0], list)) or n != 1


def _prompts(payload: dict[str, Any]) -> tuple[list[Any], str]:
    text = payload.get("text")
    if text is not None:
        return (text if isinstance(text, list) else [text]), "text"
    ids = payload.get("input_ids")
    if isinstance(ids, list) and ids and isinstance(ids[0], list):
        return ids, "input_ids"
    return [ids], "input_ids"


def item_prompt_hash(item: dict[str, Any]) -> str:
    """The prompt hash `specsuite.server.generation` records, so a quoted violation can be matched to it."""
    text, ids = item.get("text"), item.get("input_ids")
    return prompt_hash(text if isinstance(text, str) else None, ids if isinstance(ids, list) else None)



def stop_strings(params: dict[str, Any]) -> list[str]:
    stop = params.get("stop")
    if isinstance(stop, str):
        return [stop] if stop else []
    return [s for s in (stop or []) if isinstance(s, str) and s]



def stop_seen_at(stop: str, ids: list[int], context: IntegrityContext) -> int | None:
    """The id count at which SGLang's stop check first sees `stop`; None when it never does.

    SGLang searches the last stop_str_max_len + 1 (+ the step's extra) ids, decoded on their own
    WITH special tokens (schedule_batch.py `tail_str`, `_stop_match_tail_len`; stop_str_max_len is
    the longest stop's id count, sampling_params.py `normalize`). A stop string spread over more ids
    than that (a non-canonical split), or one that only shows once special tokens are skipped, is
    never seen, and SGLang generates on. Without a tokenizer: assumed seen at the last id."""
    if context.decode is None or context.encode is None:
        return len(ids)
    window = len(context.encode(stop)) + 1
    for count in range(1, len(ids) + 1):
        if stop in context.decode(ids[max(0, count - window):count], False):
            return count
    return None



def stream_finals(payload: dict[str, Any], chunks: list[dict[str, Any]], incremental: bool = False) -> list[dict[str, Any] | None]:
    """The answer each request item's stream adds up to (None where it sent nothing).

    Cumulative streams: the last chunk. Incremental streams: text, output_ids and output logprob
    lists concatenated, with the last chunk's remaining meta_info.
    """
    items = split_payload(payload)
    batch = is_batch_payload(payload)
    per_item: list[list[dict[str, Any]]] = [[] for _ in items]
    for chunk in chunks:
        index = chunk.get("index", 0) if batch else 0
        if isinstance(index, int) and 0 <= index < len(items):
            per_item[index].append(chunk)
    return [_reassemble(item_chunks, incremental) if item_chunks else None for item_chunks in per_item]


def _reassemble(chunks: list[dict[str, Any]], incremental: bool) -> dict[str, Any]:
    last = chunks[-1]
    if not incremental:
        return {key: value for key, value in last.items() if key != "index"}
    meta = dict(last.get("meta_info") or {})
    for key in ("output_token_logprobs", "output_top_logprobs"):
        if key in meta:
            meta[key] = [entry for chunk in chunks for entry in (chunk.get("meta_info") or {}).get(key) or []]
    return {
        "text": "".join(c.get("text") or "" for c in chunks),
        "output_ids": [i for c in chunks for i in c.get("output_ids") or []],
        "meta_info": meta,
    }


