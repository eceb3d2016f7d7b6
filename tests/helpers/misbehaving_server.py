"""An SGLang-shaped aiohttp server that produces a chosen fault on each /generate request.

It answers /model_info (pointing at the reference model's tokenizer folder, so a suite can load the
vocabulary), /server_info, /flush_cache, /health and /ready like SGLang, and serves /generate
(streamed or not) with a canned, well-formed answer unless told otherwise. Faults (`FAULTS`) are
taken per /generate request from a script, in arrival order; after the script, `default` applies.

In-process:   with MisbehavingServer(["ok", "http_500"]) as server: ... server.url ...
Standalone:   python -m tests.helpers.misbehaving_server --port 31000 --faults ok,ok,crash --pid-file p
              (standalone, `crash` ends the process; in-process it closes every socket and stops listening)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import struct
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web
from tokenizers import Tokenizer

MODEL_DIR = Path(__file__).resolve().parents[2] / "specsuite" / "refserver" / "model"
ANSWER = " The baker fills 8 bags, because 24 loaves in bags of 3 make 8. The answer is 8."

FAULTS = {
    "ok": "a well-formed answer",
    "slow": "a well-formed answer after slow_s seconds",
    "http_500": "HTTP 500 with SGLang's error body",
    "http_503": "HTTP 503 with Retry-After",
    "http_429": "HTTP 429 with Retry-After",
    "reset": "reset the connection (RST) without answering",
    "stall": "answer nothing (non-stream) or stop after one chunk (stream) for stall_s seconds",
    "crash": "die: standalone the process exits; in-process every socket closes and the port stops listening",
    "crash_mid_stream": "send one stream chunk, then crash",
    "stream_truncated": "send stream chunks, then end the body without data: [DONE]",
    "stream_non_json": "send a data: line that is not JSON",
    "stream_error_object": 'HTTP 200 stream carrying data: {"error": {...}} then data: [DONE] (SGLang\'s in-stream error)',
    "missing_meta_info": "drop finish_reason and completion_tokens from meta_info",
    "bad_finish_reason": 'finish_reason as the bare string "length" (OpenAI style)',
    "non_json_body": "HTTP 200 with an HTML body",
}


class _Model:
    """The canned answer: fixed ids from the reference tokenizer, cut to max_new_tokens."""

    def __init__(self) -> None:
        self.tokenizer = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
        self.eos_id = int(json.loads((MODEL_DIR / "config.json").read_text())["eos_token_id"])
        self.ids = self.tokenizer.encode(ANSWER, add_special_tokens=False).ids

    def answer(self, payload: dict[str, Any], count: int | None = None) -> dict[str, Any]:
        params = payload.get("sampling_params") or {}
        budget = params.get("max_new_tokens", 128) if isinstance(params, dict) else 128
        budget = budget if isinstance(budget, int) and budget >= 0 else 128
        if budget <= len(self.ids):
            ids, finish, visible = self.ids[:budget], {"type": "length", "length": budget}, self.ids[:budget]
        else:
            ids, finish, visible = [*self.ids, self.eos_id], {"type": "stop", "matched": self.eos_id}, self.ids
        shown = ids if count is None else ids[:count]
        done = count is None or count >= len(ids)
        meta: dict[str, Any] = {"id": "misbehaving", "finish_reason": finish if done else None, "prompt_tokens": 4,
                                "completion_tokens": len(shown), "cached_tokens": 0}
        if payload.get("return_logprob"):
            meta["input_token_logprobs"] = []
            meta["output_token_logprobs"] = [[-0.25, token, None] for token in shown]
        text_ids = visible if done else visible[: len(shown)]
        return {"text": self.tokenizer.decode(text_ids), "output_ids": shown, "meta_info": meta}


class MisbehavingServer:
    """The server on its own thread and event loop; a context manager."""

    def __init__(self, faults: Iterable[str] = (), default: str = "ok", *, retry_after: str | None = "1", stall_s: float = 30.0,
                 slow_s: float = 0.5, exit_on_crash: bool = False, api_key: str | None = None,
                 host: str = "127.0.0.1", port: int = 0) -> None:
        self._lock = threading.Lock()
        self._script: list[str] = []
        self.set_faults(faults, default)
        self.retry_after = retry_after
        self.stall_s = stall_s
        self.slow_s = slow_s
        self.exit_on_crash = exit_on_crash
        self.api_key = api_key
        self.host, self.port = host, port
        self.generate_count = 0
        self.applied: list[str] = []  # the fault applied to each /generate request, in order
        self.crashed = False
        self._model = _Model()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self._thread: threading.Thread | None = None

    # -- control ---------------------------------------------------------------------------
    def set_faults(self, faults: Iterable[str], default: str | None = None) -> None:
        """Replace the script (one fault per coming /generate request) and, if given, the default."""
        faults = list(faults)
        for name in [*faults, *([default] if default else [])]:
            if name not in FAULTS:
                raise ValueError(f"unknown fault {name!r}; expected one of {', '.join(FAULTS)}")
        with self._lock:
            self._script = faults
            if default:
                self.default = default

    def _next_fault(self) -> str:
        with self._lock:
            fault = self._script.pop(0) if self._script else self.default
            self.generate_count += 1
            self.applied.append(fault)
            return fault

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # -- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> MisbehavingServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> MisbehavingServer:
        started = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._open())
            except BaseException as exc:  # hand the failure to the starting thread
                failure.append(exc)
                started.set()
                return
            started.set()
            loop.run_forever()
            loop.run_until_complete(self._close())
            loop.close()

        self._thread = threading.Thread(target=serve, name="misbehaving-server", daemon=True)
        self._thread.start()
        if not started.wait(30):
            raise RuntimeError("misbehaving server did not start within 30 s")
        if failure:
            raise failure[0]
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(15)

    async def _open(self) -> None:
        self._runner = web.AppRunner(self._app(), handler_cancellation=True, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        self._site = web.TCPSite(self._runner, self.host, self.port)
        await self._site.start()
        self.port = self._runner.addresses[0][1]

    async def _close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _crash(self, request: web.Request) -> None:
        if self.exit_on_crash:
            os._exit(3)
        self.crashed = True
        assert self._site is not None and self._runner is not None and self._runner.server is not None
        # Abort every open connection before the first await: requests in flight on other
        # connections must die with the process, not finish while the listener closes.
        _reset(request)
        for handler in list(self._runner.server.connections):
            if handler.transport is not None:
                handler.transport.abort()
        await self._site.stop()  # new connections are refused from now on

    # -- routes ----------------------------------------------------------------------------
    def _app(self) -> web.Application:
        app = web.Application(middlewares=[self._auth])
        app.router.add_post("/generate", self._generate)
        app.router.add_get("/model_info", self._model_info)
        app.router.add_get("/server_info", self._server_info)
        app.router.add_route("*", "/flush_cache", self._flush_cache)
        app.router.add_get("/health", self._ready)
        app.router.add_get("/ready", self._ready)
        return app

    @web.middleware
    async def _auth(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if self.api_key and not request.path.startswith(("/health", "/ready")):
            if request.headers.get("Authorization") != f"Bearer {self.api_key}":
                return web.json_response({"error": "Unauthorized"}, status=401)
        return await handler(request)

    async def _model_info(self, request: web.Request) -> web.Response:
        return web.json_response({"model_path": str(MODEL_DIR), "tokenizer_path": str(MODEL_DIR), "served_model_name": "misbehaving",
                                  "is_generation": True, "weight_version": "default"})

    async def _server_info(self, request: web.Request) -> web.Response:
        return web.json_response({"model_path": str(MODEL_DIR), "version": "0.5.23", "api_key": self.api_key, "random_seed": 0,
                                  "launch_command": "python -m tests.helpers.misbehaving_server", "speculative_algorithm": None,
                                  "internal_states": [{"api_key": self.api_key}]})

    async def _flush_cache(self, request: web.Request) -> web.Response:
        return web.Response(text="Cache flushed.\n")

    async def _ready(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        payload = await request.json()
        if self.crashed:  # a request that reached us while the listener was closing
            _reset(request)
            return web.Response()
        fault = self._next_fault()
        stream = bool(payload.get("stream"))
        if fault == "slow":
            await asyncio.sleep(self.slow_s)
        if fault in ("http_500", "http_503", "http_429"):
            status = int(fault[-3:])
            headers = {"Retry-After": self.retry_after} if self.retry_after is not None and status != 500 else None
            body = {"error": {"message": f"injected HTTP {status}"}}
            return web.json_response(body, status=status, headers=headers)
        if fault == "reset":
            _reset(request)
            return web.Response()
        if fault == "crash":
            await self._crash(request)
            return web.Response()
        if fault == "non_json_body":
            return web.Response(text="<html>502 Bad Gateway</html>", content_type="text/html")
        if stream:
            return await self._stream(request, payload, fault)
        if fault == "stall":
            await asyncio.sleep(self.stall_s)
        answer = self._model.answer(payload)
        if fault == "missing_meta_info":
            for name in ("finish_reason", "completion_tokens"):
                answer["meta_info"].pop(name)
        elif fault == "bad_finish_reason":
            answer["meta_info"]["finish_reason"] = "length"
        return web.json_response(answer)

    async def _stream(self, request: web.Request, payload: dict[str, Any], fault: str) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        if fault == "stream_error_object":
            error = {"error": {"message": "injected in-stream error", "type": "invalid_request_error", "code": 400, "retryable": False}}
            await response.write(b"data: " + orjson.dumps(error) + b"\n\ndata: [DONE]\n\n")
            return response
        final = self._model.answer(payload)
        total = len(final["output_ids"])
        for count in range(1, total + 1):
            chunk = self._model.answer(payload, count)
            if fault == "missing_meta_info" and count == total:
                chunk["meta_info"].pop("finish_reason")
            if fault == "bad_finish_reason" and count == total:
                chunk["meta_info"]["finish_reason"] = "length"
            await response.write(b"data: " + orjson.dumps(chunk) + b"\n\n")
            if count == 1 and fault == "stall":
                await asyncio.sleep(self.stall_s)
            if count == 1 and fault == "crash_mid_stream":
                await self._crash(request)
                return response
            if count == 2 and fault == "stream_non_json":
                await response.write(b"data: {\"text\": \"cut here\n\n")
            if count == 2 and fault == "stream_truncated":
                await response.write_eof()
                return response
        await response.write(b"data: [DONE]\n\n")
        return response


def _reset(request: web.Request) -> None:
    """Close the request's connection with a TCP RST (SO_LINGER 0), so the client sees a reset."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--faults", default="", help="comma-separated script, one fault per /generate request")
    parser.add_argument("--default", default="ok", choices=sorted(FAULTS))
    parser.add_argument("--slow-s", type=float, default=0.5)
    parser.add_argument("--stall-s", type=float, default=30.0)
    parser.add_argument("--retry-after", default="1")
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--pid-file", default=None, help="write this process's pid here once listening")
    args = parser.parse_args(argv)
    server = MisbehavingServer([f for f in args.faults.split(",") if f], args.default, retry_after=args.retry_after, stall_s=args.stall_s,
                               slow_s=args.slow_s, exit_on_crash=True, api_key=args.api_key, host=args.host, port=args.port)
    server.start()
    if args.pid_file:
        Path(args.pid_file).write_text(str(os.getpid()))
    print(f"misbehaving server on {server.url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
