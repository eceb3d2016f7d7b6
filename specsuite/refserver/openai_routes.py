"""OpenAI-compatible routes (/v1/models, /v1/completions, /v1/chat/completions) over the engine,
shaped as SGLang 0.5.23 serves them: raw rid ids, delta streaming, optional usage chunk."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import orjson
from aiohttp import web

from specsuite.refserver.engine_request import EngineRequest, LogprobConfig
from specsuite.refserver.protocol import MAX_N, ContractError, GenerateItem, RequestValueError, sampling_config
from specsuite.refserver.responses import output_text, streamable_text
from specsuite.refserver.server import (
    STATE_KEY,
    ServerState,
    _open_sse,
    engine_requests,
    engine_updates,
    in_flight,
    json_response,
    openai_error,
    read_json,
    require_json_content_type,
    wait_all,
)


def _model_card(state: ServerState) -> dict[str, Any]:
    name = state.server_args["served_model_name"]
    return {"id": name, "object": "model", "created": int(state.started_at), "owned_by": "sglang", "root": name,
            "parent": None, "max_model_len": state.model.context_length}


async def list_models(request: web.Request) -> web.Response:
    return json_response({"object": "list", "data": [_model_card(request.app[STATE_KEY])]})


def _finish_reason(engine_request: EngineRequest) -> tuple[str | None, Any]:
    reason = engine_request.finish_reason
    if reason is None:
        return None, None
    return reason["type"], reason.get("matched")


def _sampling_params(body: dict[str, Any], max_tokens: int | None) -> dict[str, Any]:
    params: dict[str, Any] = {"max_new_tokens": max_tokens}
    for ours, theirs in (("temperature", "temperature"), ("top_p", "top_p"), ("top_k", "top_k"), ("stop", "stop"),
                         ("stop_token_ids", "stop_token_ids"), ("ignore_eos", "ignore_eos"), ("min_new_tokens", "min_tokens"),
                         ("skip_special_tokens", "skip_special_tokens"), ("no_stop_trim", "no_stop_trim"), ("sampling_seed", "seed"),
                         ("min_p", "min_p"), ("frequency_penalty", "frequency_penalty"), ("presence_penalty", "presence_penalty"),
                         ("repetition_penalty", "repetition_penalty"), ("logit_bias", "logit_bias")):
        if body.get(theirs) is not None:
            params[ours] = body[theirs]
    return params


def _usage(pairs: list[tuple[EngineRequest, asyncio.Event]], n: int = 1) -> dict[str, Any]:
    # SGLang counts prompt tokens once per prompt, not once per choice (n > 1 repeats a prompt).
    prompt = sum(len(r.prompt_ids) for r, _ in pairs[::n])
    completion = sum(len(r.output_ids) for r, _ in pairs)
    return {"prompt_tokens": prompt, "total_tokens": prompt + completion, "completion_tokens": completion,
            "prompt_tokens_details": None, "reasoning_tokens": 0, "completion_tokens_details": None}


def _spec_details(engine_request: EngineRequest, num_draft_tokens: int) -> dict[str, Any] | None:
    if engine_request.verify_ct == 0:
        return None
    proposed = engine_request.verify_ct * (num_draft_tokens - 1)
    return {"spec_accept_rate": engine_request.num_correct_drafts / proposed,
            "spec_accept_length": len(engine_request.output_ids) / engine_request.verify_ct,
            "spec_num_correct_drafts": engine_request.num_correct_drafts, "spec_num_proposed_drafts": proposed,
            "spec_verify_ct": engine_request.verify_ct, "spec_correct_drafts_histogram": engine_request.correct_drafts_histogram}


def _completion_logprobs(state: ServerState, engine_request: EngineRequest, start: int = 0, end: int | None = None) -> dict[str, Any]:
    """The OpenAI logprobs object for output positions [start, end) (srt/entrypoints/openai/utils.py:
    126-174). Without top logprobs asked for, meta_info has no output_top_logprobs and the
    server reads it as `[]` (serving_completions.py:317, 597), so `top_logprobs` is empty."""
    model = state.model
    ids = engine_request.output_ids[start:end]
    tokens = [model.decode_unclamped([i], False) for i in ids]
    tops = []
    if engine_request.logprobs.top_logprobs_num > 0:
        tops = [{model.decode_unclamped([i], False): lp for lp, i in position} for position in engine_request.output_top_logprobs[start:end]]
    return {"text_offset": [-1] * len(tokens), "token_logprobs": list(engine_request.output_logprobs[start:end]), "tokens": tokens,
            "top_logprobs": tops}


async def _start(request: web.Request, prompts: list[list[int] | str], params: dict[str, Any], n: int, logprobs: LogprobConfig):
    state = request.app[STATE_KEY]
    if n > MAX_N:
        raise RequestValueError(f"n must be in [1, {MAX_N}].")
    sampling = [sampling_config(dict(params)) for _ in range(len(prompts) * n)]
    items = []
    for index, config in enumerate(sampling):
        prompt = prompts[index // n]
        items.append(GenerateItem(uuid.uuid4().hex, prompt if isinstance(prompt, str) else None,
                                  prompt if isinstance(prompt, list) else None, config, logprobs, index))
    return state, engine_requests(state, items, asyncio.get_running_loop())


async def completions(request: web.Request) -> web.StreamResponse:
    require_json_content_type(request)
    body = await read_json(request)
    if not isinstance(body, dict) or not body.get("prompt"):
        return openai_error("`prompt` is required and must be non-empty.")
    prompt = body["prompt"]
    def is_ids(value: Any) -> bool:
        return isinstance(value, list) and bool(value) and all(isinstance(t, int) and not isinstance(t, bool) for t in value)

    if isinstance(prompt, str) or is_ids(prompt):
        prompts = [prompt]
    elif isinstance(prompt, list) and all(isinstance(p, str) or is_ids(p) for p in prompt):
        prompts = list(prompt)
    else:
        return openai_error("`prompt` must be a string, a list of strings, or token ids.")
    max_tokens = body.get("max_tokens", 16)
    if not isinstance(max_tokens, int) or max_tokens <= 0:
        return openai_error("max_tokens must be a positive integer.")
    top = body.get("logprobs")
    try:
        logprobs = LogprobConfig(return_logprob=top is not None, top_logprobs_num=_count_field(body, "logprobs", 0, 0), return_text_in_logprobs=True)
        state, pairs = await _start(request, prompts, _sampling_params(body, max_tokens), _count_field(body, "n", 1, 1), logprobs)
    except (ContractError, RequestValueError) as exc:
        return openai_error(str(exc))
    rid = pairs[0][0].rid
    model_name = body.get("model", "default")
    with in_flight(state, pairs):
        if body.get("stream"):
            return await _stream_completions(request, state, pairs, rid, model_name, body)
        await wait_all(pairs)
    choices = []
    for index, (engine_request, _) in enumerate(pairs):
        kind, matched = _finish_reason(engine_request)
        choice = {"index": index, "text": output_text(state.model, engine_request),
                  "logprobs": _completion_logprobs(state, engine_request) if top is not None else None,
                  "finish_reason": kind, "matched_stop": matched}
        if body.get("return_token_ids"):
            # return_token_ids also asks for the prompt's ids (serving_completions.py:133, 620-628)
            choice["token_ids"] = list(engine_request.output_ids)
            choice["prompt_token_ids"] = [int(i) for i in engine_request.prompt_ids]
        choices.append(choice)
    payload = {"id": rid, "object": "text_completion", "created": int(time.time()), "model": model_name,
               "choices": choices, "usage": _usage(pairs, _count_field(body, "n", 1, 1)), "metadata": {"weight_version": "default"}}
    if body.get("return_spec_tokens_details"):
        payload["sglext"] = {"spec_tokens_details": _spec_details(pairs[0][0], state.num_draft_tokens)}
    return json_response(payload)


def _include_usage(body: dict[str, Any]) -> bool:
    options = body.get("stream_options")
    return isinstance(options, dict) and bool(options.get("include_usage"))


def _visible_text(state: ServerState, engine_request: EngineRequest, count: int, finished: bool) -> str:
    return output_text(state.model, engine_request) if finished else streamable_text(state.model, engine_request, count)


async def _stream_completions(request, state, pairs, rid, model_name, body) -> web.StreamResponse:
    """One chunk per native update, choices interleaved as they arrive, each chunk named by its own
    request's rid (srt/entrypoints/openai/serving_completions.py:225-400): the text delta; with
    `logprobs`, the logprobs of the new positions (null when none are new); with
    `return_token_ids`, the new output ids (`token_ids`) and, on a choice's first chunk, its
    `prompt_token_ids`. Chunks serialize `usage: null`; the usage chunk comes last."""
    response = await _open_sse(request)
    want_logprobs, want_ids = body.get("logprobs") is not None, bool(body.get("return_token_ids"))
    text_sent, ids_sent = [0] * len(pairs), [0] * len(pairs)
    first = [True] * len(pairs)
    async for index, count, finished in engine_updates(pairs):
        engine_request = pairs[index][0]
        text = _visible_text(state, engine_request, count, finished)
        kind, matched = _finish_reason(engine_request) if finished else (None, None)
        choice: dict[str, Any] = {"index": index, "text": text[text_sent[index]:],
                                  "logprobs": (_completion_logprobs(state, engine_request, ids_sent[index], count)
                                               if want_logprobs and count > ids_sent[index] else None),
                                  "finish_reason": kind, "matched_stop": matched}
        if want_ids:
            choice["token_ids"] = engine_request.output_ids[ids_sent[index]:count]
            if first[index]:
                choice["prompt_token_ids"] = [int(i) for i in engine_request.prompt_ids]
        text_sent[index], ids_sent[index], first[index] = len(text), count, False
        chunk = {"id": engine_request.rid, "object": "text_completion", "created": int(time.time()), "model": model_name,
                 "choices": [choice], "usage": None}
        await response.write(b"data: " + orjson.dumps(chunk) + b"\n\n")
    if _include_usage(body):
        usage = {k: v for k, v in _usage(pairs, _count_field(body, "n", 1, 1)).items() if v is not None}
        chunk = {"id": rid, "object": "text_completion", "created": int(time.time()), "model": model_name, "choices": [], "usage": usage}
        await response.write(b"data: " + orjson.dumps(chunk) + b"\n\n")
    await response.write(b"data: [DONE]\n\n")
    return response


def _chat_prompt(messages: list[dict[str, Any]]) -> str:
    """The tokenizer_config.json chat template, rendered directly (role tokens, then assistant)."""
    texts = [_message_text(m) for m in messages]  # checks each message is an object first
    parts = [f"<|{m.get('role', 'user')}|>\n{text}\n" for m, text in zip(messages, texts, strict=True)]
    return "".join(parts) + "<|assistant|>\n"


def _message_text(message: Any) -> str:
    """A message's content as text; a list of parts is flattened like SGLang's "string" template
    format: text parts joined with spaces, other parts dropped."""
    if not isinstance(message, dict):
        raise RequestValueError("each message must be an object with `role` and `content`.")
    content = message.get("content")
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        return " ".join(p["text"] for p in content if isinstance(p, dict) and p.get("type") in ("text", "input_text") and isinstance(p.get("text"), str))
    raise RequestValueError("message `content` must be a string or a list of content parts.")


def _count_field(body: dict[str, Any], name: str, default: int, minimum: int) -> int:
    """An optional integer field such as `n` or `top_logprobs` (null means the default)."""
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise RequestValueError(f"`{name}` must be an integer of at least {minimum}.")
    return value


def _chat_logprobs(state: ServerState, engine_request: EngineRequest, start: int = 0, end: int | None = None) -> dict[str, Any]:
    """Chat logprobs for output positions [start, end): one entry per token."""
    content = []
    positions = zip(engine_request.output_logprobs[start:end], engine_request.output_ids[start:end],
                    engine_request.output_top_logprobs[start:end], strict=False)
    for lp, token_id, tops in positions:
        token = state.model.decode_unclamped([token_id], False)
        content.append({"token": token, "bytes": list(token.encode()), "logprob": lp,
                        "top_logprobs": [{"token": state.model.decode_unclamped([i], False), "logprob": v} for v, i in tops]})
    return {"content": content}


async def chat_completions(request: web.Request) -> web.StreamResponse:
    require_json_content_type(request)
    body = await read_json(request)
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
        return openai_error("`messages` is required and must be a non-empty list.")
    if body.get("stream") and body.get("return_token_ids"):  # serving_chat.py:1315-1320
        return openai_error("return_token_ids is not supported with streaming on /v1/chat/completions. "
                            "Please set stream=false when using return_token_ids=true.")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    want_logprobs = bool(body.get("logprobs"))
    try:
        logprobs = LogprobConfig(return_logprob=want_logprobs, top_logprobs_num=_count_field(body, "top_logprobs", 0, 0) if want_logprobs else 0)
        state, pairs = await _start(request, [_chat_prompt(body["messages"])], _sampling_params(body, max_tokens), _count_field(body, "n", 1, 1), logprobs)
    except (ContractError, RequestValueError) as exc:
        return openai_error(str(exc))
    rid, model_name = pairs[0][0].rid, body.get("model", "default")
    with in_flight(state, pairs):
        if body.get("stream"):
            return await _stream_chat(request, state, pairs, rid, model_name, body)
        await wait_all(pairs)
    choices = []
    for index, (engine_request, _) in enumerate(pairs):
        kind, matched = _finish_reason(engine_request)
        content = _chat_logprobs(state, engine_request)["content"] if want_logprobs else []
        choice = {"index": index, "message": {"role": "assistant", "content": output_text(state.model, engine_request), "reasoning_content": None},
                  "logprobs": {"content": content} if want_logprobs else None, "finish_reason": kind, "matched_stop": matched}
        if body.get("return_token_ids"):  # srt/entrypoints/openai/serving_chat.py:2975-2982, 3014-3015
            choice["prompt_token_ids"] = [int(i) for i in engine_request.prompt_ids]
            choice["response_token_ids"] = list(engine_request.output_ids)
        choices.append(choice)
    return json_response({"id": rid, "object": "chat.completion", "created": int(time.time()), "model": model_name,
                          "choices": choices, "usage": _usage(pairs, _count_field(body, "n", 1, 1)), "metadata": {"weight_version": "default"}})


async def _stream_chat(request, state, pairs, rid, model_name, body) -> web.StreamResponse:
    """Chat chunks as SGLang sends them (srt/entrypoints/openai/serving_chat.py:2441-2660): per
    update, a choice's first chunk carries the role, then content deltas; the finish chunks of
    all choices come after the last update, then the optional usage chunk."""
    response = await _open_sse(request)

    async def emit(chunk_id: str, choices: list[dict[str, Any]], **extra: Any) -> None:
        chunk = {"id": chunk_id, "object": "chat.completion.chunk", "created": int(time.time()), "model": model_name, "choices": choices, **extra}
        await response.write(b"data: " + orjson.dumps(chunk) + b"\n\n")

    text_sent, logprobs_sent = [0] * len(pairs), [0] * len(pairs)
    want_logprobs = bool(body.get("logprobs"))
    first = [True] * len(pairs)
    finished_order: list[int] = []
    last_id = rid
    async for index, count, finished in engine_updates(pairs):
        engine_request = pairs[index][0]
        last_id = engine_request.rid
        if first[index]:
            first[index] = False
            await emit(last_id, [{"index": index, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}])
        text = _visible_text(state, engine_request, count, finished)
        delta, text_sent[index] = text[text_sent[index]:], len(text)
        # This step's logprobs ride on its content chunk; a step with no text delta sends no
        # chunk, and its logprobs are lost (serving_chat.py:1031-1057).
        step_logprobs = _chat_logprobs(state, engine_request, logprobs_sent[index], count) if want_logprobs and count > logprobs_sent[index] else None
        logprobs_sent[index] = count
        if delta:
            await emit(last_id, [{"index": index, "delta": {"content": delta}, "logprobs": step_logprobs, "finish_reason": None}])
        if finished:
            finished_order.append(index)
    for index in finished_order:
        kind, matched = _finish_reason(pairs[index][0])
        await emit(last_id, [{"index": index, "delta": {}, "logprobs": None, "finish_reason": kind, "matched_stop": matched}])
    if _include_usage(body):
        await emit(rid, [], usage={k: v for k, v in _usage(pairs, _count_field(body, "n", 1, 1)).items() if v is not None})
    await response.write(b"data: [DONE]\n\n")
    return response


def add_openai_routes(app: web.Application) -> None:
    app.router.add_get("/v1/models", list_models)
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat_completions)
