"""Soak: many concurrent clients for a fixed time against the reference server, and nothing lost.

`--concurrency` workers (256 by default) each send native /generate requests back to back, half of
them streamed, until `--duration` seconds (300 by default) have passed; then no request starts and
the ones in flight finish (each is bounded by `--request-timeout`). Every request becomes one JSONL
record the moment it ends (specsuite.results.store.RecordWriter, flushed per record): ok with its
completion_tokens, or error with its error class (specsuite.server.faults). At the end the soak checks that
four counts agree:

- requests sent == records written == records read back from the JSONL file;
- ok records == the server's increase in `sglang:num_requests_total`;
- the ok records' completion_tokens summed == the increase in `sglang:generation_tokens_total`;
- no request was aborted on the server (`sglang:num_aborted_requests_total` unchanged).

    .venv/bin/python tools/calibration/soak.py                                   # 5 minutes, 256 clients, own server
    .venv/bin/python tools/calibration/soak.py --duration 20 --concurrency 64 --out /tmp/soak
    .venv/bin/python tools/calibration/soak.py --server-url http://127.0.0.1:30000   # a running server (loopback only)

It prints one JSON summary (also written as soak.json next to records.jsonl) and exits 0 when the
counts agree, 1 when they do not, 2 on a usage error. Only loopback servers are accepted: a soak
is a load test, not something to point at a shared host by accident.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere

from specsuite.errors import SpecsuiteError  # noqa: E402
from specsuite.families.correctness.prompts import load_prompts  # noqa: E402
from specsuite.results.store import RecordWriter, read_records, write_json_atomic  # noqa: E402
from specsuite.server.counters import parse_prometheus  # noqa: E402
from specsuite.server.faults import (  # noqa: E402
    ErrorClass,
    FaultGuard,
    RequestFault,
    RunPolicy,
    RunStopped,
    check_generate_result,
    check_stream_result,
    classify,
    process_alive_probe,
    status_class,
)
from specsuite.server.launcher import launch_reference_server  # noqa: E402

COUNTERS = ("sglang:num_requests_total", "sglang:generation_tokens_total", "sglang:num_aborted_requests_total")
SETTLE_TIMEOUT_S = 60.0


@dataclass
class SoakTally:
    """What the workers did, counted as they did it (one event loop: no locks needed)."""

    sent: int = 0
    ok: int = 0
    errors: int = 0
    skipped_after_stop: int = 0
    completion_tokens: int = 0
    error_classes: dict[str, int] = field(default_factory=dict)
    latencies_s: list[float] = field(default_factory=list)


def require_loopback(url: str) -> str:
    """The URL if its host is a loopback address or localhost; a SpecsuiteError otherwise."""
    host = urlsplit(url).hostname or ""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise SpecsuiteError(f"the soak only runs against a loopback server (127.0.0.1, ::1, localhost), got {host!r}")
    return url.rstrip("/")


async def read_counters(session: aiohttp.ClientSession, url: str) -> dict[str, float]:
    async with session.get(f"{url}/metrics") as response:
        if response.status != 200:
            raise SpecsuiteError(f"{url}/metrics answered HTTP {response.status}: start the server with --enable-metrics")
        values = parse_prometheus(await response.text())
    missing = [name for name in COUNTERS if name not in values]
    if missing:
        raise SpecsuiteError(f"{url}/metrics lacks {', '.join(missing)}")
    return values


async def settled_counters(session: aiohttp.ClientSession, url: str) -> dict[str, float]:
    """Counters once nothing runs or waits on the server (every finished request is counted)."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while True:
        values = await read_counters(session, url)
        idle = values.get("sglang:num_running_reqs", 0) == 0 and values.get("sglang:num_queue_reqs", 0) == 0
        if idle or time.monotonic() > deadline:
            return values
        await asyncio.sleep(0.2)


async def _send(session: aiohttp.ClientSession, url: str, payload: dict[str, Any]) -> dict[str, Any]:
    """One /generate; returns the final answer (the last chunk of a stream), checked for shape."""
    async with session.post(f"{url}/generate", json=payload) as response:
        if response.status != 200:
            text = (await response.text())[:200]
            raise RequestFault(status_class(response.status), f"HTTP {response.status}: {text}", status=response.status)
        if not payload["stream"]:
            answer = orjson.loads(await response.read())
            check_generate_result(answer)
            return answer
        chunks = []
        async for raw in response.content:
            line = raw.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[len(b"data:"):].strip()
            if data == b"[DONE]":
                return check_stream_result(chunks)
            try:
                chunk = orjson.loads(data)
            except orjson.JSONDecodeError:
                raise RequestFault(ErrorClass.STREAM_NON_JSON, f"non-JSON data line {data[:80]!r}") from None
            if isinstance(chunk, dict) and "error" in chunk:
                raise RequestFault(ErrorClass.STREAM_ERROR_OBJECT, f"in-stream error {str(chunk['error'])[:160]}")
            chunks.append(chunk)
        raise RequestFault(ErrorClass.STREAM_TRUNCATED, f"stream ended without data: [DONE] after {len(chunks)} chunks")


async def _worker(worker: int, session: aiohttp.ClientSession, url: str, deadline: float, args: argparse.Namespace,
                  prompts: list[str], writer: RecordWriter, tally: SoakTally, guard: FaultGuard) -> None:
    number = 0
    while time.monotonic() < deadline:
        index = worker + number * args.concurrency  # unique per request, stable for a given seed
        number += 1
        stream = index % 2 == 1
        payload = {"text": prompts[index % len(prompts)], "stream": stream, "rid": f"soak-{args.seed}-{index}",
                   "sampling_params": {"max_new_tokens": args.max_new_tokens, "temperature": 1.0, "top_p": 0.95,
                                       "sampling_seed": args.seed * 1_000_003 + index}}
        record: dict[str, Any] = {"index": index, "worker": worker, "stream": stream}
        try:
            guard.check()
        except RunStopped as stop:
            tally.skipped_after_stop += 1
            writer.write({**record, "status": "skipped", "reason": str(stop)})
            return
        tally.sent += 1
        started = time.monotonic()
        try:
            answer = await _send(session, url, payload)
        except (SpecsuiteError, aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            error_class = classify(exc).value
            guard.record_failure(exc)
            tally.errors += 1
            tally.error_classes[error_class] = tally.error_classes.get(error_class, 0) + 1
            writer.write({**record, "status": "error", "error_class": error_class, "error": str(exc)[:300], "request": payload})
            continue
        guard.record_answer()
        latency = time.monotonic() - started
        tokens = answer["meta_info"]["completion_tokens"]
        tally.ok += 1
        tally.completion_tokens += tokens
        tally.latencies_s.append(latency)
        writer.write({**record, "status": "ok", "completion_tokens": tokens, "finish_reason": answer["meta_info"]["finish_reason"],
                      "latency_s": round(latency, 4)})


async def run_soak(url: str, out_dir: Path, args: argparse.Namespace, server_alive=None) -> dict[str, Any]:
    """Run the soak against `url`, write records.jsonl and soak.json under `out_dir`, return the summary."""
    prompts = [item.prompt for item in load_prompts()]
    records_path = out_dir / "records.jsonl"
    if records_path.exists():
        raise SpecsuiteError(f"{records_path} already exists; choose another --out")
    tally = SoakTally()
    guard = FaultGuard(RunPolicy(max_consecutive_connection_failures=max(8, args.concurrency // 4)), server_alive=server_alive)
    timeout = aiohttp.ClientTimeout(total=args.request_timeout, sock_connect=5)
    connector = aiohttp.TCPConnector(limit=args.concurrency)
    started = time.monotonic()
    with RecordWriter(records_path) as writer:
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
            before = await settled_counters(session, url)
            deadline = time.monotonic() + args.duration
            workers = [_worker(w, session, url, deadline, args, prompts, writer, tally, guard) for w in range(args.concurrency)]
            try:
                await asyncio.wait_for(asyncio.gather(*workers), timeout=args.duration + args.request_timeout + 30)
                hard_stop = False
            except asyncio.TimeoutError:  # cannot happen while every request honours its own timeout
                hard_stop = True
            elapsed = time.monotonic() - started
            after = await settled_counters(session, url)
        written = writer.count
    read_back = read_records(records_path)
    delta = {name: after[name] - before[name] for name in COUNTERS}
    checks = {
        "sent == written": tally.sent == written - tally.skipped_after_stop,
        "written == read back": written == len(read_back),
        "ok == server num_requests_total": tally.ok == delta["sglang:num_requests_total"],
        "completion tokens == server generation_tokens_total": tally.completion_tokens == delta["sglang:generation_tokens_total"],
        "no aborted requests": delta["sglang:num_aborted_requests_total"] == 0,
        "no errors": tally.errors == 0,
        "ended in time": not hard_stop,
    }
    latencies = sorted(tally.latencies_s)
    summary = {
        "url": url, "duration_s": args.duration, "elapsed_s": round(elapsed, 2), "concurrency": args.concurrency,
        "max_new_tokens": args.max_new_tokens, "seed": args.seed,
        "requests_sent": tally.sent, "records_written": written, "records_read_back": len(read_back), "ok": tally.ok,
        "errors": tally.errors, "error_classes": tally.error_classes, "skipped_after_stop": tally.skipped_after_stop,
        "completion_tokens": tally.completion_tokens, "server_counter_deltas": delta,
        "requests_per_s": round(tally.sent / elapsed, 2) if elapsed else None,
        "latency_s": {"p50": latencies[len(latencies) // 2], "p99": latencies[int(len(latencies) * 0.99)], "max": latencies[-1]} if latencies else None,
        "stop_reason": guard.stop_reason, "checks": checks, "lossless": all(checks.values()),
        "records": str(records_path),
    }
    write_json_atomic(out_dir / "soak.json", summary)
    return summary


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=300.0, help="seconds during which new requests start (default 300)")
    parser.add_argument("--concurrency", type=int, default=256, help="concurrent clients (default 256)")
    parser.add_argument("--max-new-tokens", type=int, default=16, help="per request (default 16)")
    parser.add_argument("--request-timeout", type=float, default=120.0, help="seconds one request may take (default 120)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--server-url", default=None, help="a running loopback server with --enable-metrics (default: start the fix arm)")
    parser.add_argument("--out", default=None, help="folder for records.jsonl, soak.json and the server log (default ./specsuite-results/soak-<UTC time>)")
    args = parser.parse_args(argv)
    if args.duration <= 0 or args.concurrency < 1 or args.max_new_tokens < 1 or args.request_timeout <= 0:
        parser.error("--duration, --concurrency, --max-new-tokens and --request-timeout must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out_dir = Path(args.out) if args.out else ROOT / "specsuite-results" / time.strftime("soak-%Y%m%dT%H%M%SZ", time.gmtime())
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        if args.server_url:
            summary = asyncio.run(run_soak(require_loopback(args.server_url), out_dir, args))
        else:
            with launch_reference_server("fix", out_dir, ready_timeout_s=120) as server:
                summary = asyncio.run(run_soak(server.base_url, out_dir, args, server_alive=process_alive_probe(lambda: server.running)))
    except SpecsuiteError as exc:
        print(f"soak: error: {exc}", file=sys.stderr)
        return 2
    print(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode())
    return 0 if summary["lossless"] else 1


if __name__ == "__main__":
    sys.exit(main())
