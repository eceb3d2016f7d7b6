"""Generated-token throughput of the reference server over real HTTP.

Two phases against streaming /generate, with step emulation off: a single stream (one request at
a time) and CONCURRENCY streams (16 by default) sharing the server.  Each reports generated
tokens per second of wall time, requests per second, time to first token and the pooled accept
length.  Requests use fixed per-request `sampling_seed`s and, by default, `ignore_eos` so every
request produces exactly `--max-new-tokens` tokens and runs are comparable.

    .venv/bin/python tools/calibration/refserver_throughput.py --out /tmp/throughput.json
    .venv/bin/python tools/calibration/refserver_throughput.py --url http://127.0.0.1:30000 --temperature 1.0

Without `--url` it starts the reference server itself (`--arm`, default fix) on a free port.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere

from specsuite.errors import SpecsuiteError  # noqa: E402
from specsuite.server.launcher import launch_reference_server  # noqa: E402

PROMPTS_FILE = ROOT / "specsuite/fixtures/data/correctness_prompts.jsonl"
TARGETS_TOK_S = {"single": 500.0, "concurrent": 2000.0}


@dataclass
class RequestStats:
    """What one streamed request measured."""

    output_tokens: int
    verify_steps: int
    ttft_s: float
    latency_s: float


@dataclass
class PhaseResult:
    """One phase: a number of requests at a fixed concurrency."""

    name: str
    concurrency: int
    requests: int
    output_tokens: int
    wall_s: float
    tokens_per_s: float
    requests_per_s: float
    mean_ttft_ms: float
    median_request_tokens_per_s: float
    pooled_accept_length: float | None
    target_tokens_per_s: float
    target_met: bool


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="an already running server (default: start the reference server)")
    parser.add_argument("--arm", default="fix", help="reference server arm when the script starts it")
    parser.add_argument("--server-arg", action="append", default=[], help="extra reference server argument (repeatable)")
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--single-requests", type=int, default=8, help="requests in the single-stream phase")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--concurrent-requests", type=int, default=64, help="requests in the concurrent phase")
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--ignore-eos", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--seed", type=int, default=0, help="request i uses sampling_seed seed + i")
    parser.add_argument("--timeout-s", type=float, default=300.0, help="per request")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args(argv)
    for name in ("single_requests", "concurrency", "concurrent_requests", "max_new_tokens"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


def load_prompts() -> list[str]:
    return [json.loads(line)["prompt"] for line in PROMPTS_FILE.read_text().splitlines() if line.strip()]


def request_body(args: argparse.Namespace, prompt: str, index: int) -> dict[str, Any]:
    params = {"max_new_tokens": args.max_new_tokens, "temperature": args.temperature, "top_p": args.top_p,
              "ignore_eos": args.ignore_eos, "sampling_seed": args.seed + index}
    return {"text": prompt, "sampling_params": params, "stream": True}


async def stream_one(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> RequestStats:
    """Send one streaming /generate; the chunks are cumulative, so the last one has the totals."""
    started = time.perf_counter()
    first_token_at = None
    last: dict[str, Any] | None = None
    async with session.post(f"{url}/generate", json=body) as response:
        if response.status != 200:
            raise SpecsuiteError(f"/generate answered HTTP {response.status}: {(await response.text())[:200]}")
        async for line in response.content:
            if not line.startswith(b"data: {"):
                continue
            chunk = json.loads(line[len(b"data: "):])
            if "error" in chunk:
                raise SpecsuiteError(f"/generate stream error: {chunk['error']}")
            if first_token_at is None and chunk.get("output_ids"):
                first_token_at = time.perf_counter()
            last = chunk
    finished = time.perf_counter()
    if last is None or last["meta_info"].get("finish_reason") is None:
        raise SpecsuiteError("a /generate stream ended without a finished chunk")
    meta = last["meta_info"]
    return RequestStats(meta["completion_tokens"], meta.get("spec_verify_ct", 0),
                        (first_token_at or finished) - started, finished - started)


async def run_phase(args: argparse.Namespace, url: str, name: str, concurrency: int, count: int, offset: int,
                    headers: dict[str, str]) -> PhaseResult:
    """`count` requests, `concurrency` in flight; request i gets prompt and seed offset + i."""
    prompts = load_prompts()
    queue: asyncio.Queue[int] = asyncio.Queue()
    for index in range(offset, offset + count):
        queue.put_nowait(index)
    stats: list[RequestStats] = []
    timeout = aiohttp.ClientTimeout(total=args.timeout_s, sock_connect=5)
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(timeout=timeout, headers=headers, connector=connector, trust_env=False) as session:

        async def worker() -> None:
            while not queue.empty():
                index = queue.get_nowait()
                stats.append(await stream_one(session, url, request_body(args, prompts[index % len(prompts)], index)))

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - started
    tokens = sum(s.output_tokens for s in stats)
    verify_steps = sum(s.verify_steps for s in stats)
    tokens_per_s = tokens / wall
    return PhaseResult(
        name=name,
        concurrency=concurrency,
        requests=len(stats),
        output_tokens=tokens,
        wall_s=wall,
        tokens_per_s=tokens_per_s,
        requests_per_s=len(stats) / wall,
        mean_ttft_ms=1000 * statistics.fmean(s.ttft_s for s in stats),
        median_request_tokens_per_s=statistics.median(s.output_tokens / s.latency_s for s in stats),
        pooled_accept_length=tokens / verify_steps if verify_steps else None,
        target_tokens_per_s=TARGETS_TOK_S[name],
        target_met=tokens_per_s >= TARGETS_TOK_S[name],
    )


async def fetch_server_info(url: str, headers: dict[str, str]) -> dict[str, Any]:
    timeout = aiohttp.ClientTimeout(total=10, sock_connect=5)
    async with aiohttp.ClientSession(timeout=timeout, headers=headers, trust_env=False) as session:
        async with session.get(f"{url}/server_info") as response:
            if response.status != 200:
                raise SpecsuiteError(f"/server_info answered HTTP {response.status}")
            return await response.json()


async def benchmark(args: argparse.Namespace, url: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    info = await fetch_server_info(url, headers)
    if info.get("refserver_step_time_ms") or info.get("refserver_extra_step_us"):
        print("warning: the server emulates step time; these numbers do not measure the engine", file=sys.stderr)
    await run_phase(args, url, "single", 1, 1, 10_000, headers)  # warm-up, not reported
    single = await run_phase(args, url, "single", 1, args.single_requests, 0, headers)
    concurrent = await run_phase(args, url, "concurrent", args.concurrency, args.concurrent_requests, args.single_requests, headers)
    keys = ("refserver_arm", "speculative_algorithm", "speculative_num_steps", "speculative_num_draft_tokens",
            "speculative_use_rejection_sampling", "disable_cuda_graph", "refserver_step_time_ms", "refserver_extra_step_us")
    return {
        "url": url,
        "server": {key: info.get(key) for key in keys},
        "request": {"max_new_tokens": args.max_new_tokens, "temperature": args.temperature, "top_p": args.top_p,
                    "ignore_eos": args.ignore_eos, "seed": args.seed},
        "phases": [asdict(single), asdict(concurrent)],
    }


def print_table(report: dict[str, Any]) -> None:
    header = f"{'phase':<11}{'conc':>5}{'reqs':>6}{'tokens':>8}{'wall s':>8}{'tok/s':>9}{'target':>8}{'met':>5}{'TTFT ms':>9}{'req tok/s':>10}{'accept':>8}"
    print(header)
    print("-" * len(header))
    for p in report["phases"]:
        accept = f"{p['pooled_accept_length']:.2f}" if p["pooled_accept_length"] else "-"
        print(f"{p['name']:<11}{p['concurrency']:>5}{p['requests']:>6}{p['output_tokens']:>8}{p['wall_s']:>8.2f}"
              f"{p['tokens_per_s']:>9.0f}{p['target_tokens_per_s']:>8.0f}{'yes' if p['target_met'] else 'no':>5}"
              f"{p['mean_ttft_ms']:>9.1f}{p['median_request_tokens_per_s']:>10.0f}{accept:>8}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.url:
            report = asyncio.run(benchmark(args, args.url.rstrip("/")))
        else:
            extra = [*args.server_arg, *(["--api-key", args.api_key] if args.api_key else [])]
            with tempfile.TemporaryDirectory(prefix="refserver-bench-") as log_dir:
                with launch_reference_server(args.arm, log_dir, extra_args=extra, ready_timeout_s=120, api_key=args.api_key) as server:
                    report = asyncio.run(benchmark(args, server.base_url))
    except SpecsuiteError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
        print(f"error: cannot talk to the server: {exc or type(exc).__name__}", file=sys.stderr)
        return 2
    print_table(report)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
