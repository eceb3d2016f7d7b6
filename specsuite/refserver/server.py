"""aiohttp application: SGLang 0.5.23's native endpoints over the reference engine.

OpenAI-compatible routes live in openai_routes.py and app.py joins both into the application; this
module holds /generate, the info and health routes, tokenize/detokenize, flush_cache, metrics, abort
and the API-key middleware.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator

import numpy as np
import orjson
from aiohttp import web

from specsuite.refserver.engine import Engine
from specsuite.refserver.engine_process import EngineProcess
from specsuite.refserver.engine_request import EngineRequest, LogprobConfig, SamplingConfig
from specsuite.refserver.metrics import render_metrics
from specsuite.refserver.model_loading import ReferenceModel
from specsuite.refserver.protocol import (
    ContractError,
    GenerateItem,
    RequestValueError,
    UnhandledServerError,
    check_logit_bias_ids,
    parse_generate,
)
from specsuite.refserver.responses import generate_result, meta_info, output_text, streamable_text

SGLANG_VERSION = "0.5.23"
_OPEN_PREFIXES = ("/health", "/ready", "/metrics")
# The routes of this server that SGLang marks @auth_level(AuthLevel.ADMIN_OPTIONAL)
# (srt/entrypoints/http_server.py:1025-1026 /flush_cache, 1721-1722 /abort_request).
ADMIN_ROUTES = frozenset({"/flush_cache", "/abort_request"})

HEALTH_CHECK_RID_PREFIX = "HEALTH_CHECK"  # srt/constants.py:12
HEALTH_POLL_S = 1.0  # /health looks for an answer once a second (srt/entrypoints/http_server.py:778-779)
BEAM_WITH_SPECULATION = "Beam search is not supported with speculative decoding."  # srt/beam_search/coordinator.py:125-126


def health_endpoint_generates() -> bool:
    """SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION (default true, srt/environ.py:344): false makes
    /health a plain 200 once up; /health_generate always generates (http_server.py:745-749)."""
    return os.environ.get("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION", "true").lower() not in ("false", "0", "no", "n")


def health_check_timeout_s() -> float:
    """SGLang's SGLANG_HEALTH_CHECK_TIMEOUT, default 20 s (srt/entrypoints/http_server.py:218)."""
    return float(os.environ.get("SGLANG_HEALTH_CHECK_TIMEOUT", "20"))


@dataclass
class ServerState:
    """What the handlers share: the model, the engine and the resolved server args."""

    model: ReferenceModel
    engine: Engine | EngineProcess  # the process with --step-time-ms
    server_args: dict[str, Any]
    launch_command: str
    api_key: str | None
    enable_metrics: bool
    ready: bool = False
    admin_api_key: str | None = None
    unhealthy: bool = False  # a /health generation got no answer in time (SGLang: ServerStatus.UnHealthy)
    last_receive_at: float = 0.0  # monotonic time of the last engine update for any request
    started_at: float = field(default_factory=time.time)
    arrivals: int = 0
    live: dict[str, EngineRequest] = field(default_factory=dict)

    @property
    def num_draft_tokens(self) -> int:
        return self.engine.config.num_draft_tokens if self.engine.config.speculative else 0

    @property
    def num_reserved_tokens(self) -> int:
        """SGLang's output slots reserved per request on top of its input: EAGLE stores its draft tokens there,
        max(topk * steps, draft tokens) (0.5.23 managers/utils.py:484-500); other algorithms reserve none."""
        config = self.engine.config
        return max(config.num_steps, config.num_draft_tokens) if config.speculative else 0


STATE_KEY = web.AppKey("state", ServerState)


def json_response(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY),
                        status=status, content_type="application/json")


def openai_error(message: str, status: int = 400, kind: str = "Bad Request") -> web.Response:
    return json_response({"object": "error", "message": message, "type": kind, "param": None, "code": status}, status)


async def read_json(request: web.Request) -> Any:
    """The JSON body, or a 400 in FastAPI's validation-error shape."""
    raw = await request.read()
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise web.HTTPBadRequest(body=orjson.dumps({"object": "error", "message": f"JSON decode error: {exc}", "type": "Bad Request",
                                                    "param": None, "code": 400}),
                                 content_type="application/json") from None


def require_json_content_type(request: web.Request) -> None:
    if request.content_type != "application/json":
        raise web.HTTPBadRequest(body=orjson.dumps({"object": "error", "message": "Unsupported Media Type: Only 'application/json' is allowed",
                                                    "type": "Bad Request", "param": None, "code": 400}),
                                 content_type="application/json")


def _bearer_matches(header: str | None, expected: str) -> bool:
    """`Authorization: Bearer <key>`, scheme case-insensitive, key compared in constant time."""
    scheme, separator, supplied = (header or "").partition(" ")
    return bool(separator) and scheme.lower() == "bearer" and hmac.compare_digest(supplied.encode(), expected.encode())


def required_key(state: ServerState, method: str, path: str) -> str | None:
    """The key a request must carry, or None when it is open (SGLang's decide_request_auth,
    srt/utils/auth.py:98-151): OPTIONS and /health*, /ready*, /metrics* are always open; an
    admin route wants the admin key when one is set (the API key is then refused), else the API
    key; every other route wants the API key when one is set, and is open with only an admin key."""
    if method == "OPTIONS" or path.startswith(_OPEN_PREFIXES):
        return None
    if path in ADMIN_ROUTES:
        return state.admin_api_key or state.api_key
    return state.api_key


@web.middleware
async def api_key_middleware(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
    """SGLang's rule: only `Authorization: Bearer <key>`, per route level (see `required_key`)."""
    key = required_key(request.app[STATE_KEY], request.method, request.path)
    if key and not _bearer_matches(request.headers.get("Authorization"), key):
        return json_response({"error": "Unauthorized"}, 401)
    return await handler(request)


# --------------------------------------------------------------------------- /generate
def check_context_length(context_length: int, reserved: int, input_len: int, max_new_tokens: int | None) -> None:
    """SGLang's length checks before a request is queued (0.5.23 managers/tokenizer_manager.py:1333-1375): the input
    plus the reserved draft slots must stay below the context length, and with them max_new_tokens must fit in it."""
    input_token_num = input_len + reserved
    if input_token_num >= context_length:
        raise RequestValueError(f"The input ({input_token_num} tokens) is longer than the model's context length ({context_length} tokens).")
    if max_new_tokens is not None and max_new_tokens + input_token_num > context_length:
        raise RequestValueError(
            f"Requested token count exceeds the model's maximum context length of {context_length} tokens. "
            f"You requested a total of {max_new_tokens + input_token_num} tokens: {input_token_num} tokens from the input "
            f"messages and {max_new_tokens} tokens for the completion. Please reduce the number of tokens in the input messages "
            f"or the completion to fit within the limit.")


def engine_requests(state: ServerState, items: list[GenerateItem], loop: asyncio.AbstractEventLoop) -> list[tuple[EngineRequest, asyncio.Event]]:
    """Tokenize, check lengths, and turn validated items into engine requests with wake-ups."""
    model = state.model
    out = []
    for item in items:
        if item.rid in state.live:
            raise RequestValueError(f"Duplicate request ID detected: {item.rid}")
        prompt_ids = item.input_ids if item.input_ids is not None else model.encode(item.text or "")
        if not prompt_ids:
            raise RequestValueError("The input is empty after tokenization.")
        if any(not 0 <= i < model.vocab_size for i in prompt_ids):
            raise RequestValueError(f"input_ids must be in [0, {model.vocab_size}).")
        check_context_length(model.context_length, state.num_reserved_tokens, len(prompt_ids), item.sampling.max_new_tokens)
        if item.sampling.max_new_tokens is None:  # SGLang: null means "up to the context length"
            item.sampling.max_new_tokens = max(model.context_length - len(prompt_ids) - 1, 0)
        item.sampling.stop_str_max_len = model.stop_str_max_len(item.sampling.stop)
        check_logit_bias_ids(item.sampling, model.vocab_size)
        if item.logprobs.return_logprob and item.logprobs.logprob_start_len > len(prompt_ids):
            raise RequestValueError(f"logprob_start_len={item.logprobs.logprob_start_len} is higher than the number of input tokens {len(prompt_ids)}.")
        if item.beam_width > 1 and not state.engine.config.speculative:
            raise RequestValueError("beam search (beam_width > 1) is not supported by the reference server")
        seed = item.sampling.sampling_seed
        rng = np.random.default_rng(seed & ((1 << 64) - 1) if seed is not None else [state.server_args["random_seed"], state.arrivals])
        state.arrivals += 1
        event = asyncio.Event()
        engine_request = EngineRequest(item.rid, np.asarray(prompt_ids, dtype=np.int64), item.sampling, item.logprobs,
                                       state.arrivals, rng, notify=lambda e=event: _received(state, loop, e),
                                       log_metrics=item.log_metrics)
        if item.beam_width > 1:
            # The scheduler refuses a beam request on a speculative server by aborting it with
            # status 400 before it runs (srt/managers/scheduler.py:3040-3046).
            _abort_before_running(engine_request, event, BEAM_WITH_SPECULATION, 400)
        out.append((engine_request, event))
    return out


def _received(state: ServerState, loop: asyncio.AbstractEventLoop, event: asyncio.Event) -> None:
    """An engine update for some request (called from the engine's thread)."""
    state.last_receive_at = time.monotonic()  # SGLang's tokenizer_manager.last_receive_tstamp
    loop.call_soon_threadsafe(event.set)


def _abort_before_running(engine_request: EngineRequest, event: asyncio.Event, message: str, status_code: int) -> None:
    """Finish a request the scheduler refuses: it never reaches the engine (see `in_flight`)."""
    engine_request.created_at = engine_request.finished_at = time.time()
    engine_request.finish_reason = {"type": "abort", "message": message, "status_code": status_code, "err_type": None}
    engine_request.finished.set()
    event.set()


def abort_error_response(results: list[dict[str, Any]]) -> web.Response | None:
    """What a non-streamed request answers when one of its results was aborted with an HTTP
    status: the whole request fails, batch or not (the batch gathers its results, so one raise
    fails them all: srt/managers/tokenizer_manager.py:2192-2194). 400 is a ValueError answered
    `{"error": {"message": ...}}` (http_server.py:2246-2250); other 4xx/5xx an HTTPException in
    the OpenAI error shape (tokenizer_manager.py:1891-1922, http_server.py:578). An abort without a
    status (a client's /abort_request) is returned as a normal result."""
    for result in results:
        reason = result["meta_info"]["finish_reason"]
        code = reason.get("status_code") if reason.get("type") == "abort" else None
        if isinstance(code, int) and 400 <= code < 600:
            message = reason.get("message")
            if code == 400:
                return json_response({"error": {"message": message}}, 400)
            return json_response({"object": "error", "message": message, "type": str(code), "param": None, "code": code}, code)
    return None


def internal_server_error() -> web.Response:
    """Starlette's answer to an exception no handler catches."""
    return web.Response(status=500, text="Internal Server Error")


async def generate(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE_KEY]
    body = await read_json(request)
    try:
        items, is_batch, stream = parse_generate(body, lambda: uuid.uuid4().hex)
        pairs = engine_requests(state, items, asyncio.get_running_loop())
    except ContractError as exc:
        return json_response({"error": str(exc)}, 400)
    except RequestValueError as exc:
        if isinstance(body, dict) and body.get("stream") is True:
            return await _stream_error(request, str(exc))
        return json_response({"error": {"message": str(exc)}}, 400)
    except UnhandledServerError:
        if isinstance(body, dict) and body.get("stream") is True:
            # The exception is raised inside the already-started stream: no event, no [DONE].
            return await _open_sse(request)
        return internal_server_error()
    with in_flight(state, pairs):
        if stream:
            return await _stream(request, state, pairs, is_batch)
        await wait_all(pairs)
        results = [generate_result(state.model, r, state.num_draft_tokens) for r, _ in pairs]
        return abort_error_response(results) or json_response(results if is_batch else results[0])


@contextlib.contextmanager
def in_flight(state: ServerState, pairs: list[tuple[EngineRequest, asyncio.Event]]) -> Iterator[None]:
    """Submit the requests and keep them findable by rid (/abort_request) while the handler runs.
    A handler that ends before its requests finished has nobody left to answer (the client went away: the
    handler was cancelled, or a write to the closed socket raised, whichever error aiohttp chose), so
    whatever is unfinished then is aborted."""
    for engine_request, _ in pairs:
        state.live[engine_request.rid] = engine_request
        if engine_request.finish_reason is None:  # one the scheduler refused never runs
            state.engine.submit(engine_request)
    try:
        yield
    finally:
        for engine_request, _ in pairs:
            state.live.pop(engine_request.rid, None)
            if engine_request.finish_reason is None:
                state.engine.abort(engine_request)


async def wait_all(pairs: list[tuple[EngineRequest, asyncio.Event]]) -> None:
    await asyncio.gather(*(_wait_finished(r, e) for r, e in pairs))


async def _wait_finished(engine_request: EngineRequest, event: asyncio.Event) -> None:
    while engine_request.finish_reason is None:
        await event.wait()
        event.clear()


async def _stream_error(request: web.Request, message: str) -> web.StreamResponse:
    response = await _open_sse(request)
    error = {"error": {"message": message, "type": "invalid_request_error", "code": 400, "retryable": False}}
    await response.write(b"data: " + orjson.dumps(error) + b"\n\n" + b"data: [DONE]\n\n")
    return response


async def _open_sse(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    return response


async def engine_updates(pairs: list[tuple[EngineRequest, asyncio.Event]]) -> AsyncIterator[tuple[int, int, bool]]:
    """(index, output ids visible, finished) each time a request of the batch shows new output
    or finishes, interleaved across the batch as the updates arrive (SGLang streams a batch
    first-come: srt/managers/tokenizer_manager.py:2211-2226); every request's last update is its
    finish."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    sent = [0] * len(pairs)
    done = [False] * len(pairs)

    async def watch(index: int, engine_request: EngineRequest, event: asyncio.Event) -> None:
        while True:
            await event.wait()
            event.clear()
            await queue.put(index)
            if engine_request.finish_reason is not None:
                return

    watchers = [asyncio.create_task(watch(i, r, e)) for i, (r, e) in enumerate(pairs)]
    try:
        while not all(done):
            index = await queue.get()
            engine_request = pairs[index][0]
            if done[index]:
                continue
            finished = engine_request.finish_reason is not None
            count = len(engine_request.output_ids)
            if count == sent[index] and not finished:
                continue
            sent[index], done[index] = count, finished
            yield index, count, finished
    finally:
        for watcher in watchers:
            watcher.cancel()


async def _stream(request: web.Request, state: ServerState, pairs: list[tuple[EngineRequest, asyncio.Event]], is_batch: bool) -> web.StreamResponse:
    """Cumulative SSE chunks (text and output_ids so far), one per engine update, then [DONE]."""
    response = await _open_sse(request)
    first = [True] * len(pairs)
    async for index, count, finished in engine_updates(pairs):
        engine_request = pairs[index][0]
        chunk = {
            "text": output_text(state.model, engine_request) if finished else streamable_text(state.model, engine_request, count),
            "output_ids": engine_request.output_ids[:count],
            "meta_info": meta_info(state.model, engine_request, count, state.num_draft_tokens, first_chunk=first[index]),
        }
        if is_batch:
            chunk["index"] = index
        first[index] = False
        await response.write(b"data: " + orjson.dumps(chunk) + b"\n\n")
    await response.write(b"data: [DONE]\n\n")
    return response


# --------------------------------------------------------------------------- info and health
def model_info_payload(state: ServerState) -> dict[str, Any]:
    args = state.server_args
    return {
        "model_path": args["model_path"],
        "served_model_name": args["served_model_name"],
        "tokenizer_path": args["tokenizer_path"],
        "is_generation": True,
        "preferred_sampling_params": None,
        "weight_version": "default",
        "load_format": "auto",
        "reasoning_parser": None,
        "tool_call_parser": None,
        "disaggregation_mode": "null",
        "has_image_understanding": False,
        "has_audio_understanding": False,
        "model_type": state.model.config.get("model_type"),
        "architectures": state.model.config.get("architectures"),
    }


def server_info_payload(state: ServerState) -> dict[str, Any]:
    """Flat resolved args plus handshake keys; like SGLang, it echoes api_key in plain text."""
    internal = dict(state.server_args)
    internal.update({
        "world_size": 1,
        "startup_time": state.started_at,
        "effective_max_running_requests_per_dp": state.engine.config.max_running_requests,
        "last_gen_throughput": 0.0,
        "memory_usage": {"graph": {}},
    })
    average = state.engine.average_accept_length()
    if state.engine.config.speculative and average is not None:
        internal["avg_spec_accept_length"] = average
    info = dict(state.server_args)
    info.update({
        "launch_command": state.launch_command,
        "status": "ready" if state.ready else "starting",
        "max_total_num_tokens": state.model.context_length * state.engine.config.max_running_requests,
        # The scheduler's limit (0.5.23 managers/tp_worker.py:568-572): min(context - 1, KV pool - 1) - 5.
        "max_req_input_len": state.model.context_length - 1 - 5,
        "startup_time": state.started_at,
        "kv_events": None,
        "version": SGLANG_VERSION,
        "frontend": "python",
        "internal_states": [internal],
    })
    return info


async def model_info(request: web.Request) -> web.Response:
    return json_response(model_info_payload(request.app[STATE_KEY]))


async def server_info(request: web.Request) -> web.Response:
    return json_response(server_info_payload(request.app[STATE_KEY]))


async def health(request: web.Request) -> web.Response:
    """/health and /health_generate as SGLang 0.5.23 answers them (srt/entrypoints/http_server.py:
    721-799): 503 while starting; otherwise a one-token greedy generation of `input_ids=[0]`
    under a HEALTH_CHECK_ rid, then a look once a second for any engine answer since the check
    began, the health request's or another's (a busy server is healthy: 777-783); 200 (empty
    body) then, 503 (empty body) when nothing came within SGLANG_HEALTH_CHECK_TIMEOUT, which also
    marks the server unhealthy (so /ready says 503) until a later check succeeds."""
    state = request.app[STATE_KEY]
    if not state.ready:
        return web.Response(status=503)
    if request.path == "/health" and not health_endpoint_generates():
        return web.Response(status=200)
    # log_metrics False, as SGLang's check (http_server.py:757-761): a poll is in no sglang: request counter.
    item = GenerateItem(f"{HEALTH_CHECK_RID_PREFIX}_{uuid.uuid4().hex}", None, [0],
                        SamplingConfig(max_new_tokens=1, temperature=1.0, top_k=1), LogprobConfig(), 0, log_metrics=False)
    [(engine_request, event)] = engine_requests(state, [item], asyncio.get_running_loop())
    # The clock starts before the submit: SGLang takes `tic` before its request task first runs
    # (http_server.py:775-778). An answer stamped before a later start would never count, and a quick one can
    # arrive before this handler runs again.
    started = time.monotonic()
    with contextlib.suppress(OSError, EOFError):  # an engine process that is gone never answers
        state.engine.submit(engine_request)
    try:
        while time.monotonic() < started + health_check_timeout_s():
            await asyncio.sleep(HEALTH_POLL_S)
            if state.last_receive_at > started:
                state.unhealthy = False
                return web.Response(status=200)
        state.unhealthy = True
        return web.Response(status=503)
    finally:
        if engine_request.finish_reason is None:
            with contextlib.suppress(OSError, EOFError):
                state.engine.abort(engine_request)


async def ready(request: web.Request) -> web.Response:
    state = request.app[STATE_KEY]
    return web.Response(status=200 if state.ready and not state.unhealthy else 503)


async def flush_cache(request: web.Request) -> web.Response:
    # Off the event loop: with the engine in its own process the answer is a round trip.
    engine = request.app[STATE_KEY].engine
    if await asyncio.get_running_loop().run_in_executor(None, engine.flush_spec_statistics):
        return web.Response(text="Cache flushed.\nPlease check backend logs for more details. "
                                 "(When there are running or waiting requests, the operation will not be performed.)\n")
    return web.Response(status=400, text="Cache not flushed: requests are running or waiting.\n")


async def metrics(request: web.Request) -> web.Response:
    state = request.app[STATE_KEY]
    if not state.enable_metrics:
        return json_response({"detail": "Not Found"}, 404)
    return web.Response(text=render_metrics(state.engine, state.server_args["served_model_name"]), content_type="text/plain")


async def tokenize(request: web.Request) -> web.Response:
    require_json_content_type(request)
    state = request.app[STATE_KEY]
    body = await read_json(request)
    prompt = body.get("prompt") if isinstance(body, dict) else None
    if isinstance(prompt, str):
        tokens: Any = state.model.encode(prompt)
        count: Any = len(tokens)
    elif isinstance(prompt, list) and all(isinstance(p, str) for p in prompt):
        tokens = [state.model.encode(p) for p in prompt]
        count = [len(t) for t in tokens]
    else:
        return openai_error("`prompt` must be a string or a list of strings.")
    return json_response({"tokens": tokens, "count": count, "max_model_len": state.model.context_length})


def _is_id_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in value)


async def detokenize(request: web.Request) -> web.Response:
    require_json_content_type(request)
    state = request.app[STATE_KEY]
    body = await read_json(request)
    tokens = body.get("tokens") if isinstance(body, dict) else None
    skip = body.get("skip_special_tokens", True) if isinstance(body, dict) else True
    if not isinstance(skip, bool):
        return openai_error("`skip_special_tokens` must be a boolean.")
    if _is_id_list(tokens):
        return json_response({"text": state.model.decode_unclamped(tokens, skip)})
    if isinstance(tokens, list) and all(_is_id_list(t) for t in tokens):
        return json_response({"text": [state.model.decode_unclamped(t, skip) for t in tokens]})
    return openai_error("`tokens` must be a list of ints or a list of lists of ints.")


async def abort_request(request: web.Request) -> web.Response:
    state = request.app[STATE_KEY]
    body = await read_json(request)
    if not isinstance(body, dict):
        return openai_error("body must be an object")
    rid = body.get("rid")
    if rid is not None and not isinstance(rid, str):
        return openai_error("`rid` must be a string.")
    targets = list(state.live.values()) if body.get("abort_all") else [state.live[rid]] if rid in state.live else []
    for engine_request in targets:
        state.engine.abort(engine_request)
    return web.Response(status=200)


async def not_found(request: web.Request) -> web.Response:
    return json_response({"detail": "Not Found"}, 404)
