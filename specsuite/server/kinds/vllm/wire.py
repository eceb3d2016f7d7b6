"""vLLM 0.32's /v1/completions wire: the one body builder for a typed request (`request_body`) and the translation
of its answers (choices, delta-chunk streams, logprobs, per-request speculation metrics) into the project's fields
by SGLang's names. Facts and their vLLM source lines are in docs/vllm_api_facts.md.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from specsuite.errors import SpecsuiteError
from specsuite.server.generation import Generation, prompt_hash
from specsuite.server.protocol import GenerationRequest
from specsuite.server.transport import int_list, shorten

SERVER_KIND = "vllm"
COMPLETIONS_PATH = "/v1/completions"
TOKEN_AS_ID = re.compile(r"^token_id:(-?\d+)$")
BATCH_WORKERS = 8


def one_kind(requests: Sequence[GenerationRequest]) -> bool:
    first = requests[0]
    return first.logprob_start is None and all(
        (r.prompt is None, r.sampling, r.logprobs, r.top_logprobs, r.logprob_start)
        == (first.prompt is None, first.sampling, first.logprobs, first.top_logprobs, first.logprob_start) for r in requests)


def request_body(model: str, request: GenerationRequest, *, stream: bool, raw: dict[str, Any] | None = None) -> dict[str, Any]:
    """The /v1/completions body for a typed request: ids always (`return_token_ids`), logprob ids
    when logprobs are asked for, prompt logprobs (`echo`) for a scoring request (`logprob_start`).
    `raw` (the native-payload adapter's, `native_request`): fields sent as given, in the typed field's place."""
    body: dict[str, Any] = {"model": model, "prompt": request.prompt_value, "stream": stream, "return_token_ids": True}
    body.update(request.sampling.openai_fields())
    body.update(raw or {})
    # top_k -1 is sent as it is: vLLM 0.32 reads 0 or -1 as "no top-k" (sampling_params.py:315-317), while
    # an omitted field takes the model's generation_config.json default (entrypoints/openai/completion/serving.py:80).
    if request.logprobs:
        body["logprobs"] = int(request.top_logprobs or 0)
        body["return_tokens_as_token_ids"] = True
        if request.logprob_start is not None and request.logprob_start >= 0:
            body["echo"] = True
            body["prompt_logprobs"] = int(request.top_logprobs or 0)
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


# -- translation: vLLM answer -> native item ----------------------------------------------------


def token_id_of(token: Any) -> int:
    """The id in a `token_id:<id>` logprob token (return_tokens_as_token_ids)."""
    match = TOKEN_AS_ID.match(token) if isinstance(token, str) else None
    if match is None:
        raise SpecsuiteError(f"vLLM logprob token {shorten(repr(token), 40)} is not of the form token_id:<id>")
    return int(match.group(1))


def output_triples(logprobs: Any) -> list[list[Any]] | None:
    """SGLang's `[logprob, id, None]` triples from a completions logprobs object."""
    if not isinstance(logprobs, dict):
        return None
    values, tokens = logprobs.get("token_logprobs") or [], logprobs.get("tokens") or []
    return [[value, token_id_of(token), None] for value, token in zip(values, tokens, strict=False)]


def top_triples(logprobs: Any) -> list[list[list[Any]]] | None:
    """SGLang's `output_top_logprobs`: per position the `[logprob, id, None]` of vLLM's
    `top_logprobs` dict, most likely first (vLLM adds the sampled token: up to N+1 entries)."""
    tops = logprobs.get("top_logprobs") if isinstance(logprobs, dict) else None
    if not isinstance(tops, list):
        return None
    ranked = []
    for entry in tops:
        pairs = [[value, token_id_of(token), None] for token, value in (entry or {}).items()]
        ranked.append(sorted(pairs, key=lambda triple: -(triple[0] if triple[0] is not None else float("-inf"))))
    return ranked


def finish_reason(choice: dict[str, Any], ids: list[int], params: dict[str, Any]) -> dict[str, Any] | None:
    """SGLang's finish_reason object: a stop string or stop id is `matched`; EOS (vLLM's
    stop_reason None) matches the last id; `length` carries the budget."""
    reason = choice.get("finish_reason")
    if reason is None:
        return None
    if reason == "length":
        return {"type": "length", "length": params.get("max_tokens", len(ids))}
    if reason == "stop":
        matched = choice.get("stop_reason")
        return {"type": "stop", "matched": matched if matched is not None else (ids[-1] if ids else None)}
    return {"type": reason, "message": str(choice.get("stop_reason") or reason)}


def spec_meta(metrics: Any) -> dict[str, Any]:
    """SGLang's per-request spec fields from vLLM's `metrics.speculative_decoding`, the raw
    object kept beside them. vLLM's accept length is 1 + accepted / steps (the bonus token)."""
    spec = metrics.get("speculative_decoding") if isinstance(metrics, dict) else None
    if not isinstance(spec, dict):
        return {}
    meta: dict[str, Any] = {"vllm_speculative_decoding": spec}
    steps = spec.get("num_spec_steps")
    if isinstance(steps, int) and steps > 0:
        meta["spec_verify_ct"] = steps
        meta["spec_accept_length"] = spec.get("mean_acceptance_length")
        meta["spec_accept_rate"] = spec.get("draft_acceptance_rate")
        meta["spec_num_correct_drafts"] = spec.get("num_accepted_draft_tokens")
        meta["spec_num_proposed_drafts"] = spec.get("num_draft_tokens")
    return meta


def generation_of_choice(request: GenerationRequest, body: dict[str, Any], result: dict[str, Any], choice: dict[str, Any],
                         single: bool) -> Generation:
    """One `Generation` straight from one completions choice of a typed request."""
    text, ids, meta, triples = choice_parts(body, result, choice, single, request.logprob_start)
    prompt_ids = list(request.prompt_ids) if request.prompt_ids is not None else None
    return Generation(prompt=request.prompt, prompt_ids=prompt_ids, prompt_hash=prompt_hash(request.prompt, prompt_ids),
                      params=request.sampling.params(), output_ids=ids, text=text,
                      output_logprobs=None if triples is None else [t[0] for t in triples],
                      logprob_ids=None if triples is None else [t[1] for t in triples],
                      finish_reason=meta.get("finish_reason"), completion_tokens=meta.get("completion_tokens"), meta_info=meta)


def choice_parts(body: dict[str, Any], result: dict[str, Any], choice: dict[str, Any], single: bool,
                 logprob_start: int | None = None) -> tuple[str, list[int], dict[str, Any], list[list[Any]] | None]:
    """Text, output ids, meta_info (the Generation's fields by SGLang's names) and the output
    `[logprob, id, None]` triples (None when not asked for) of one completions choice. Usage and
    metrics belong to the request, so they are used only when the request had one choice. A
    scoring request (`echo`) reports the prompt's logprobs from `logprob_start` on, as SGLang does."""
    if not isinstance(choice, dict):
        raise SpecsuiteError(f"/v1/completions choice is not an object: {shorten(repr(choice), 80)}")
    ids = int_list(choice.get("token_ids"), "/v1/completions token_ids")
    prompt_ids = choice.get("prompt_token_ids") or []
    if body.get("echo"):
        ids = ids[len(prompt_ids):]  # echo returns prompt + output ids
    usage = result.get("usage") if single and isinstance(result.get("usage"), dict) else {}
    meta: dict[str, Any] = {
        "id": result.get("id"),
        "finish_reason": finish_reason(choice, ids, body),
        "prompt_tokens": usage.get("prompt_tokens", len(prompt_ids)),
        "completion_tokens": usage.get("completion_tokens", len(ids)),
        "cached_tokens": 0,
        "server_kind": SERVER_KIND,
    }
    logprobs = choice.get("logprobs")
    triples = None
    if body.get("echo"):
        meta.update(scoring_logprobs(choice, len(prompt_ids), int(body.get("prompt_logprobs") or 0), logprob_start or 0))
        triples = []
        ids = [] if body.get("max_tokens") == 0 else ids
    elif "logprobs" in body:
        triples = output_triples(logprobs) or []
        if body["logprobs"] > 0:
            meta["output_top_logprobs"] = top_triples(logprobs) or []
    if single:
        meta.update(spec_meta(result.get("metrics")))
    return choice.get("text", ""), ids, meta, triples


def scoring_logprobs(choice: dict[str, Any], prompt_len: int, top_k: int, start: int = 0) -> dict[str, Any]:
    """`input_token_logprobs` and the top-k (`input_top_logprobs`, ranks 1..k only) of prompt
    positions `start`.. from vLLM's `prompt_logprobs`: a list, one entry per prompt position
    (None first), each a dict id -> {logprob, rank, decoded_token} holding the top-k and the
    prompt's own token, whatever its rank (kept out of the top-k unless it is in it)."""
    entries = choice.get("prompt_logprobs") or []
    prompt_ids = choice.get("prompt_token_ids") or []
    triples, tops = [], []
    for position, entry in enumerate(entries[:prompt_len]):
        if position < start:
            continue
        token = prompt_ids[position] if position < len(prompt_ids) else None
        if not isinstance(entry, dict):
            triples.append([None, token, None])
            tops.append(None)
            continue
        own = entry.get(str(token)) or {}
        triples.append([own.get("logprob"), token, None])
        ranked = sorted(((int(key), value) for key, value in entry.items() if (value.get("rank") or 0) <= top_k),
                        key=lambda kv: kv[1].get("rank") or 0)
        tops.append([[value.get("logprob"), key, None] for key, value in ranked])
    return {"input_token_logprobs": triples, "input_top_logprobs": tops}


def cumulative_parts(body: dict[str, Any], chunks: list[dict[str, Any]]) -> list[tuple[str, list[int], dict[str, Any], list[list[Any]] | None]]:
    """Cumulative (text, ids, meta, logprob triples) from vLLM's delta chunks: one per chunk that
    carried a choice; the usage-only last chunk (and its spec stats) completes the final one.
    Triples are None when the request asked for no logprobs."""
    text, ids, triples = "", [], []
    parts: list[tuple[str, list[int], dict[str, Any], list[list[Any]] | None]] = []
    usage, metrics, last_choice = None, None, None
    for chunk in chunks:
        if isinstance(chunk.get("usage"), dict):
            usage = chunk["usage"]
        if isinstance(chunk.get("metrics"), dict):
            metrics = chunk["metrics"]
        for choice in chunk.get("choices") or []:
            text += choice.get("text") or ""
            ids = ids + int_list(choice.get("token_ids") or [], "streamed token_ids")
            triples = triples + (output_triples(choice.get("logprobs")) or [])
            last_choice = choice
            meta = {"id": chunk.get("id"), "finish_reason": None, "completion_tokens": len(ids), "server_kind": SERVER_KIND}
            parts.append((text, list(ids), meta, list(triples) if "logprobs" in body else None))
    if not parts:
        raise SpecsuiteError(f"the {COMPLETIONS_PATH} stream carried no choice")
    final = parts[-1][2]
    final["finish_reason"] = finish_reason(last_choice or {}, ids, body)
    if usage is not None:
        final["prompt_tokens"] = usage.get("prompt_tokens")
        final["completion_tokens"] = usage.get("completion_tokens")
    final.update(spec_meta(metrics))
    return parts
