"""A tiny SSE server that imitates SGLang's native /generate stream and records when it sends.

It exists to measure a benchmark client against known send times (the reference server does
not export them). One "engine" ticker writes one chunk to every open stream each `--step-ms`
(0: as fast as it can), like a continuously batched server; each chunk carries one new token
(cumulative text and `meta_info.completion_tokens`, as SGLang sends), then `data: [DONE]`.
Just before each write it stamps `time.perf_counter()` (CLOCK_MONOTONIC, shared by all processes
on Linux) and keeps the stamps per stream; the stream's id is the first prompt token
(`input_ids[0]`). GET /sendlog returns and clears every stream's stamps; /model_info answers
so the stream looks SGLang-shaped. Plain asyncio, no web framework, so the emitter stays far
cheaper per chunk than any client it measures; `--cpu N` pins it to one core.

    .venv/bin/python tools/calibration/sse_emitter.py --port 38000 --step-ms 2.56 --cpu 1
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from dataclasses import dataclass, field

import orjson


@dataclass
class Stream:
    writer: asyncio.StreamWriter
    rid: int
    tokens: int
    sent: int = 0
    text: bytearray = field(default_factory=bytearray)
    done: asyncio.Event = field(default_factory=asyncio.Event)


class Emitter:
    """The ticker and the per-stream send stamps."""

    def __init__(self, step_s: float) -> None:
        self.step_s = step_s
        self.streams: list[Stream] = []
        self.sendlog: dict[int, list[float]] = {}
        self.wake = asyncio.Event()

    async def tick_forever(self) -> None:
        next_tick = time.perf_counter()
        while True:
            if not self.streams:
                self.wake.clear()
                await self.wake.wait()
                next_tick = time.perf_counter()
            for stream in list(self.streams):
                self._emit(stream)
            if self.step_s > 0:
                next_tick += self.step_s
                delay = next_tick - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                else:
                    next_tick = time.perf_counter()  # behind: do not burst to catch up
                    await asyncio.sleep(0)
            else:
                await asyncio.sleep(0)

    def _emit(self, stream: Stream) -> None:
        stream.sent += 1
        stream.text += b"tok "
        chunk = b'data: {"text":"' + bytes(stream.text) + b'","meta_info":{"completion_tokens":' + str(stream.sent).encode() + b"}}\n\n"
        if stream.sent >= stream.tokens:
            chunk += b"data: [DONE]\n\n"
        self.sendlog.setdefault(stream.rid, []).append(time.perf_counter())
        stream.writer.write(chunk)
        if stream.sent >= stream.tokens:
            self.streams.remove(stream)
            stream.done.set()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                request_line, *header_lines = head.decode("latin-1").split("\r\n")
                method, path, _ = request_line.split(" ", 2)
                headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in header_lines if line)}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                if path.startswith("/sendlog"):
                    self._reply(writer, orjson.dumps({str(k): v for k, v in self.sendlog.items()}))
                    self.sendlog = {}
                elif path.startswith("/model_info"):
                    self._reply(writer, b'{"model_path":"sse-emitter","tokenizer_path":null}')
                elif method == "POST" and path.startswith("/generate"):
                    await self._stream(writer, orjson.loads(body))
                    return
                else:
                    self._reply(writer, b'{"detail":"Not Found"}', status=b"404 Not Found")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    @staticmethod
    def _reply(writer: asyncio.StreamWriter, body: bytes, status: bytes = b"200 OK") -> None:
        writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Type: application/json\r\nContent-Length: "
                     + str(len(body)).encode() + b"\r\n\r\n" + body)

    async def _stream(self, writer: asyncio.StreamWriter, payload: dict) -> None:
        # Connection: close delimits the body, so no chunked framing costs the emitter anything.
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
        stream = Stream(writer, int(payload["input_ids"][0]), int(payload["sampling_params"]["max_new_tokens"]))
        self.streams.append(stream)
        self.wake.set()
        await stream.done.wait()
        await writer.drain()


async def serve(port: int, step_ms: float) -> None:
    emitter = Emitter(step_ms / 1000.0)
    server = await asyncio.start_server(emitter.handle, "127.0.0.1", port, backlog=1024)
    ticker = asyncio.create_task(emitter.tick_forever())
    print(f"sse-emitter ready on 127.0.0.1:{port} step {step_ms:g} ms", flush=True)
    async with server:
        try:
            await server.serve_forever()
        finally:
            ticker.cancel()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--step-ms", type=float, default=2.56, help="one chunk per stream every this many ms (0: flood)")
    parser.add_argument("--cpu", type=int, default=None, help="pin to this core")
    args = parser.parse_args(argv)
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    try:
        asyncio.run(serve(args.port, args.step_ms))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
