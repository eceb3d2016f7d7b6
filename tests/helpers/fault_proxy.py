"""A fault-injecting reverse proxy for the integrity tests: sits between a client (or a whole suite,
via --server-url) and a real server, forwards everything, and breaks answers on purpose.

Two APIs: SGLang's native `/generate`, and vLLM's OpenAI `/v1/completions` (the faults on those
shapes are in `tests/helpers/openai_fault_proxy.py`; the forwarding, SSE relay and counting here
serve both). One fault at a time, each aimed at one check (see FAULTS; OPENAI_FAULTS are the ones
that apply to `/v1/completions`). Answer faults change one answer per response (the first that
qualifies); in a native stream they change that request's final chunk, which in SGLang's
cumulative streaming is the whole answer. Streams are read to `[DONE]`, altered, then replayed as
SSE. Request faults rewrite the request before forwarding it. `mutations` counts how often the
active fault was actually applied, so a test can prove the fault happened.

In-process:  with FaultProxy(upstream_url, "swap_chunks") as proxy: ... proxy.url ...
Standalone:  python -m tests.helpers.fault_proxy --upstream http://127.0.0.1:30000 --fault eos_tail
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import socket
import threading
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from specsuite.families.integrity.comparisons import CANARY_PATTERN
from specsuite.server.native_answers import is_batch_payload, split_payload
from tests.helpers.openai_fault_proxy import OPENAI_FAULTS, PADDED_ID, break_completion, break_completion_stream

FAULTS = {
    "eos_tail": "append two ids after the matched EOS/stop id (counts and logprobs kept consistent)",
    "overshoot": "append three ids past max_new_tokens to a length-finished answer",
    "completion_off_by_one": "report completion_tokens one too high",
    "drop_logprob": "drop the last output logprob triple",
    "junk_text": "append forty words of text that no id produced",
    "keep_stop": "leave the matched stop string in the text",
    "bad_length": "make a length finish claim one token more than it produced",
    "accept_overflow": "report one more accepted draft than drafted",
    "leak_canary": "copy the first request's canary into the second request's output (batches)",
    "swap_chunks": "swap the second and third chunks of one request's stream",
    "early_finish": "put the finish_reason on a request's first chunk as well",
    "stream_tail_junk": "append '!' to the final chunk's text only (stream != non-stream)",
    "drop_seed": "remove sampling_seed from requests (a server that ignores seeds)",
    "pin_seed": "rewrite every sampling_seed to 7 (a server that mixes up seeds)",
    "padded_id": "/v1/completions only: one generated id becomes a padded-row id (logprob token kept consistent)",
    "accept_inflate": "/v1/completions only: k + 1 more accepted drafts in metrics.speculative_decoding (mean and histogram kept consistent)",
}
assert set(OPENAI_FAULTS) <= set(FAULTS), "every /v1/completions fault is named in FAULTS"
NATIVE_PATH, COMPLETIONS_PATH = "/generate", "/v1/completions"
ANSWER_FAULTS = ("eos_tail", "overshoot", "completion_off_by_one", "drop_logprob", "junk_text", "keep_stop", "bad_length", "accept_overflow")
JUNK = " ".join(["lorem"] * 40)
HOP_HEADERS = {"host", "content-length", "transfer-encoding", "connection", "accept-encoding", "keep-alive"}
UPSTREAM_TIMEOUT = aiohttp.ClientTimeout(total=300, sock_connect=5)


# --------------------------------------------------------------------------- answer faults
def _append_ids(answer: dict[str, Any], count: int) -> None:
    """Append `count` ids (copies of a generated id) with matching logprobs and counts."""
    ids = answer["output_ids"]
    filler = ids[-2] if len(ids) >= 2 else (ids[-1] if ids else 0)
    meta = answer["meta_info"]
    ids.extend([filler] * count)
    meta["completion_tokens"] = len(ids)
    triples = meta.get("output_token_logprobs")
    if isinstance(triples, list) and triples:
        triples.extend([[triples[-1][0], filler, None]] * count)
        meta["output_token_logprobs_length"] = len(triples)


def _finish(answer: dict[str, Any]) -> dict[str, Any]:
    finish = answer.get("meta_info", {}).get("finish_reason")
    return finish if isinstance(finish, dict) else {}


def _qualifies(fault: str, answer: dict[str, Any]) -> bool:
    finish, meta = _finish(answer), answer.get("meta_info", {})
    matched = finish.get("matched")
    return {
        "eos_tail": finish.get("type") == "stop" and isinstance(matched, int),
        "overshoot": finish.get("type") == "length",
        "bad_length": finish.get("type") == "length",
        "keep_stop": finish.get("type") == "stop" and isinstance(matched, str),
        "drop_logprob": bool(meta.get("output_token_logprobs")),
        "accept_overflow": "spec_num_proposed_drafts" in meta,
    }.get(fault, True)


def break_answer(fault: str, answer: dict[str, Any]) -> None:
    """Apply an answer fault to one finished answer, in place."""
    meta = answer["meta_info"]
    if fault == "eos_tail":
        _append_ids(answer, 2)
    elif fault == "overshoot":
        _append_ids(answer, 3)
    elif fault == "completion_off_by_one":
        meta["completion_tokens"] = len(answer["output_ids"]) + 1
    elif fault == "drop_logprob":
        meta["output_token_logprobs"].pop()
    elif fault == "junk_text":
        answer["text"] = answer.get("text", "") + " " + JUNK
    elif fault == "keep_stop":
        answer["text"] = answer.get("text", "") + _finish(answer)["matched"]
    elif fault == "bad_length":
        meta["finish_reason"] = {**meta["finish_reason"], "length": meta["finish_reason"]["length"] + 1}
    elif fault == "accept_overflow":
        meta["spec_num_correct_drafts"] = meta["spec_num_proposed_drafts"] + 1


class FaultProxy:
    """The proxy, served by its own event loop on a background thread."""

    def __init__(self, upstream: str, fault: str | None = None, host: str = "127.0.0.1", port: int = 0, padded_id: int = PADDED_ID) -> None:
        self.upstream = upstream.rstrip("/")
        self.fault = fault
        self.padded_id = padded_id
        self.mutations = 0
        self._host, self._port = host, port
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy", daemon=True)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.url = ""

    @property
    def fault(self) -> str | None:
        return self._fault

    @fault.setter
    def fault(self, name: str | None) -> None:
        if name is not None and name not in FAULTS:
            raise ValueError(f"unknown fault {name!r}; known: {', '.join(FAULTS)}")
        self._fault = name
        self.mutations = 0

    def start(self) -> FaultProxy:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind((self._host, self._port))
        self.url = f"http://{self._host}:{sock.getsockname()[1]}"
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(sock), self._loop).result(timeout=10)
        return self

    async def _serve(self, sock: socket.socket) -> None:
        self._session = aiohttp.ClientSession(timeout=UPSTREAM_TIMEOUT, auto_decompress=False)
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.SockSite(self._runner, sock).start()

    def stop(self) -> None:
        async def close() -> None:
            if self._runner is not None:
                await self._runner.cleanup()
            if self._session is not None:
                await self._session.close()

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout=10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ----------------------------------------------------------------------- forwarding
    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        payload = None
        if request.path in (NATIVE_PATH, COMPLETIONS_PATH) and body:
            try:
                payload = orjson.loads(body)
            except orjson.JSONDecodeError:
                payload = None
            if not isinstance(payload, dict):
                payload = None
            elif request.path == NATIVE_PATH:
                payload = self._break_request(payload)
                body = orjson.dumps(payload)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
        assert self._session is not None
        async with self._session.request(request.method, self.upstream + request.path_qs, data=body, headers=headers) as upstream:
            if upstream.content_type == "text/event-stream":
                return await self._relay_stream(request, upstream, payload)
            raw = await upstream.read()
            if payload is not None and upstream.status == 200:
                answer = orjson.loads(raw)
                if request.path == COMPLETIONS_PATH:
                    self.mutations += break_completion(self.fault, payload, answer, self.padded_id)
                else:
                    answer = self._break_answers(payload, answer)
                raw = orjson.dumps(answer)
            return web.Response(body=raw, status=upstream.status, content_type=upstream.content_type)

    async def _relay_stream(self, request: web.Request, upstream: aiohttp.ClientResponse, payload: Any) -> web.StreamResponse:
        events: list[bytes] = []
        async for raw_line in upstream.content:
            line = raw_line.rstrip(b"\r\n")
            if line.startswith(b"data: "):
                events.append(line[len(b"data: "):])
        chunks = [orjson.loads(e) for e in events if e.strip() != b"[DONE]"]
        done = len(chunks) != len(events)
        if payload is not None and all(isinstance(c, dict) and "error" not in c for c in chunks):
            if request.path == COMPLETIONS_PATH:
                chunks, applied = break_completion_stream(self.fault, payload, chunks, self.padded_id)
                self.mutations += applied
            else:
                chunks = self._break_stream(payload, chunks)
        response = web.StreamResponse(status=upstream.status, headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        for chunk in chunks:
            await response.write(b"data: " + orjson.dumps(chunk) + b"\n\n")
        if done:
            await response.write(b"data: [DONE]\n\n")
        return response

    # ----------------------------------------------------------------------- faults
    def _break_request(self, payload: dict[str, Any]) -> dict[str, Any]:
        if self.fault not in ("drop_seed", "pin_seed"):
            return payload
        params = payload.get("sampling_params")
        for entry in params if isinstance(params, list) else [params]:
            if isinstance(entry, dict) and "sampling_seed" in entry:
                if self.fault == "drop_seed":
                    del entry["sampling_seed"]
                else:
                    entry["sampling_seed"] = 7
                self.mutations += 1
        return payload

    def _break_answers(self, payload: dict[str, Any], response: Any) -> Any:
        answers = response if isinstance(response, list) else [response]
        if not all(isinstance(a, dict) and isinstance(a.get("meta_info"), dict) for a in answers):
            return response
        if self.fault in ANSWER_FAULTS:
            for answer in answers:
                if _qualifies(self.fault, answer):
                    break_answer(self.fault, answer)
                    self.mutations += 1
                    break
        elif self.fault == "leak_canary" and isinstance(response, list):
            self._leak_canary(payload, answers)
        return response

    def _leak_canary(self, payload: dict[str, Any], answers: list[dict[str, Any]]) -> None:
        prompts = [item.get("text") for item in split_payload(payload)]
        canaries = [CANARY_PATTERN.search(p) if isinstance(p, str) else None for p in prompts]
        if len(answers) >= 2 and canaries[0] is not None:
            answers[1]["text"] = answers[1].get("text", "") + " " + canaries[0].group(0)
            self.mutations += 1

    def _break_stream(self, payload: dict[str, Any], chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        batch = is_batch_payload(payload)
        positions: dict[int, list[int]] = {}
        for position, chunk in enumerate(chunks):
            positions.setdefault(chunk.get("index", 0) if batch else 0, []).append(position)
        chunks = [copy.deepcopy(c) for c in chunks]
        if self.fault in ANSWER_FAULTS:
            for index_positions in positions.values():
                final = chunks[index_positions[-1]]
                if _finish(final) and _qualifies(self.fault, final):
                    break_answer(self.fault, final)
                    self.mutations += 1
                    break
        elif self.fault == "swap_chunks":
            target = next((p for p in positions.values() if len(p) >= 3), None)
            if target is not None:
                first, second = target[1], target[2]
                chunks[first], chunks[second] = chunks[second], chunks[first]
                self.mutations += 1
        elif self.fault == "early_finish":
            target = next((p for p in positions.values() if len(p) >= 2), None)
            if target is not None:
                chunks[target[0]]["meta_info"]["finish_reason"] = chunks[target[-1]]["meta_info"]["finish_reason"]
                self.mutations += 1
        elif self.fault == "stream_tail_junk" and positions:
            final = chunks[next(iter(positions.values()))[-1]]
            final["text"] = final.get("text", "") + "!"
            self.mutations += 1
        return chunks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--upstream", required=True, help="the real server's base URL")
    parser.add_argument("--fault", choices=sorted(FAULTS), default=None, help="the fault to inject (default: none, pass-through)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: a free one)")
    args = parser.parse_args(argv)
    proxy = FaultProxy(args.upstream, args.fault, args.host, args.port).start()
    print(f"fault proxy on {proxy.url} -> {proxy.upstream}, fault {args.fault or 'none'}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        proxy.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
