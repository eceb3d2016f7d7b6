"""How much does the benchmark client cost, and how true are its timestamps?

Two parts; the client (this process) is pinned to one core, the server to the other.

1. Emitter (`tools/calibration/sse_emitter.py`, which stamps its own send times): for each concurrency in
   --levels, `concurrency` streams of --tokens one-token chunks, one chunk per stream every
   --step-ms, then the same with --step-ms 0 (the emitter floods). Reported per level: offered and
   received chunks/s, the client's CPU use (process time / wall time), and the error of the
   client's per-chunk receive timestamps (start + TTFT + cumulative chunk gaps, exactly what the
   metrics are built from) against the emitter's send stamps: p50 and p99. "Sustained" means
   a paced emitter held >= 95% of its pace and the client's median lag did not grow by more than
   --max-lag-growth-ms from the first to the last quarter of the chunks (a client that cannot
   keep up falls further behind); chunks per client CPU-second estimates what one core can
   parse, and the flood rows push the client as hard as the emitter can.
2. Reference server (`--refserver`): bench_serving's workload through `run_benchmark` against the
   reference server with step emulation (--refserver-step-ms) at each level, reporting chunks/s
   and the client's CPU per chunk; with `--sglang-python PY` (an environment with sglang
   installed) `sglang.benchmark.serving` runs beside it on the same server and settings, and its
   net CPU (minus its start-up, measured once with one tiny request) is reported too.

    .venv/bin/python tools/calibration/client_overhead.py --out /tmp/overhead.json
    .venv/bin/python tools/calibration/client_overhead.py --refserver --sglang-python /tmp/sglvenv/bin/python
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere

from specsuite.families.bench.client import (  # noqa: E402
    READ_BUFSIZE,
    RequestOutput,
    RequestSettings,
    send_request,
)
from specsuite.families.bench.datasets import DatasetRow  # noqa: E402
from specsuite.server.launcher import find_free_port, launch_reference_server  # noqa: E402

from cpu_pinning import CLIENT_CPU, SERVER_CPU, pin_process, pin_this_process  # noqa: E402  (tools/calibration/, next to this script)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", default="1,4,16,64,256", help="comma-separated concurrencies")
    parser.add_argument("--step-ms", type=float, default=2.56, help="emitter step (one chunk per stream per step)")
    parser.add_argument("--tokens", type=int, default=256, help="chunks per stream")
    parser.add_argument("--streams-per-slot", type=int, default=2, help="requests per concurrency slot at each level")
    parser.add_argument("--max-lag-growth-ms", type=float, default=1.0,
                        help="'sustained' allows the median lag to grow by at most this much from the first to the last quarter")
    parser.add_argument("--keep-alive", action="store_true", help="shared keep-alive connections (default: one per request)")
    parser.add_argument("--refserver", action="store_true", help="also drive the reference server with step emulation")
    parser.add_argument("--refserver-step-ms", type=float, default=10.0)
    parser.add_argument("--refserver-levels", default="1,4,16,64,256")
    parser.add_argument("--sglang-python", default=None, help="python with sglang installed: run bench_serving beside ours")
    parser.add_argument("--out", default=None, help="write the tables as JSON")
    return parser.parse_args(argv)


# ------------------------------------------------------------------------- part 1: emitter


def receive_times(out: RequestOutput) -> list[float]:
    """Per-chunk receive stamps as the metrics see them: start + TTFT, then each chunk gap."""
    first = out.start_time + out.ttft
    return [first, *(first + np.cumsum(out.chunk_itl)).tolist()]


async def drive(url: str, concurrency: int, requests: int, tokens: int, keep_alive: bool) -> tuple[list[RequestOutput], float, float]:
    settings = RequestSettings(backend="sglang", base_url=url, read_timeout_s=120.0)
    rows = [DatasetRow([rid], 1, tokens) for rid in range(requests)]
    semaphore = asyncio.Semaphore(concurrency)
    shared = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), read_bufsize=READ_BUFSIZE) if keep_alive else None

    async def one(row: DatasetRow) -> RequestOutput:
        async with semaphore:
            if shared is not None:
                return await send_request(shared, settings, row)
            async with aiohttp.ClientSession(read_bufsize=READ_BUFSIZE) as session:
                return await send_request(session, settings, row)

    cpu, wall = time.process_time(), time.perf_counter()
    outputs = await asyncio.gather(*(one(row) for row in rows))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    if shared is not None:
        await shared.close()
    return list(outputs), cpu, wall


async def fetch_sendlog(url: str) -> dict[str, list[float]]:
    async with aiohttp.ClientSession() as session, session.get(url + "/sendlog", timeout=aiohttp.ClientTimeout(total=60)) as response:
        return await response.json()


def lag_growth_ms(sent_at: list[float], errors: list[float]) -> float | None:
    """Median lag in the last quarter of chunks (by send time) minus that in the first quarter."""
    if len(errors) < 8:
        return None
    order = np.argsort(sent_at)
    lags = np.asarray(errors)[order]
    quarter = len(lags) // 4
    return float((np.median(lags[-quarter:]) - np.median(lags[:quarter])) * 1000)


def emitter_level(concurrency: int, step_ms: float, args: argparse.Namespace) -> dict[str, Any]:
    port = find_free_port()
    emitter = subprocess.Popen([sys.executable, str(ROOT / "tools/calibration/sse_emitter.py"), "--port", str(port), "--step-ms", str(step_ms),
                                "--cpu", str(SERVER_CPU)], stdout=subprocess.PIPE, text=True)
    try:
        assert emitter.stdout is not None and "ready" in emitter.stdout.readline()
        url = f"http://127.0.0.1:{port}"
        requests = concurrency * args.streams_per_slot
        outputs, cpu, wall = asyncio.run(drive(url, concurrency, requests, args.tokens, args.keep_alive))
        sendlog = asyncio.run(fetch_sendlog(url))
    finally:
        emitter.terminate()
        emitter.wait(timeout=10)
    failed = [o for o in outputs if not o.success]
    errors: list[float] = []
    stamps = [t for times in sendlog.values() for t in times]
    emitted_rate = len(stamps) / (max(stamps) - min(stamps)) if len(stamps) > 1 else None
    sent_at: list[float] = []
    for rid, out in enumerate(outputs):
        sent = sendlog.get(str(rid), [])
        received = receive_times(out) if out.success else []
        if len(sent) == len(received):
            errors.extend(np.subtract(received, sent).tolist())
            sent_at.extend(sent)
    lag_growth = lag_growth_ms(sent_at, errors)
    chunks = sum(len(receive_times(o)) for o in outputs if o.success)
    offered = concurrency / (step_ms / 1000.0) if step_ms > 0 else None
    received_rate = chunks / wall
    p50, p99 = (float(np.percentile(errors, q) * 1000) for q in (50, 99)) if errors else (None, None)
    row = {"concurrency": concurrency, "step_ms": step_ms, "requests": requests, "failed": len(failed), "chunks": chunks,
           "offered_chunks_per_s": offered, "emitted_chunks_per_s": emitted_rate, "received_chunks_per_s": received_rate, "client_cpu_fraction": cpu / wall,
           "client_chunks_per_cpu_s": chunks / cpu if cpu else None, "timestamp_error_p50_ms": p50, "timestamp_error_p99_ms": p99,
           "lag_growth_ms": lag_growth, "matched_chunks": len(errors)}
    # Kept up: the client's lag behind the emitter did not grow (and a paced emitter held its pace).
    paced_ok = offered is None or bool(emitted_rate and emitted_rate >= 0.95 * offered)
    row["sustained"] = bool(paced_ok and lag_growth is not None and lag_growth <= args.max_lag_growth_ms and not failed)
    return row


def print_emitter_row(row: dict[str, Any]) -> None:
    offered = f"{row['offered_chunks_per_s']:.0f}" if row["offered_chunks_per_s"] else "flood"
    print(f"  c={row['concurrency']:>4} step={row['step_ms']:g}ms offered={offered:>7} "
          f"emitted={row['emitted_chunks_per_s'] or 0:8.0f}/s received={row['received_chunks_per_s']:8.0f}/s "
          f"client CPU {row['client_cpu_fraction']:.0%} ({row['client_chunks_per_cpu_s'] or 0:.0f} chunks per CPU-s) "
          f"error p50 {row['timestamp_error_p50_ms'] or float('nan'):.3f} ms p99 {row['timestamp_error_p99_ms'] or float('nan'):.3f} ms "
          f"lag growth {row['lag_growth_ms'] if row['lag_growth_ms'] is not None else float('nan'):+.2f} ms"
          f"{' sustained' if row['sustained'] else ''}{' FAILED ' + str(row['failed']) if row['failed'] else ''}", flush=True)


# ------------------------------------------------------------------------- part 2: reference server


def refserver_level(url: str, concurrency: int, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    from specsuite.families.bench.runner import BenchConfig, run_benchmark

    prompts = max(8, 2 * concurrency)
    config = BenchConfig(base_url=url, dataset_name="random-ids", num_prompts=prompts, random_input_len=128, random_output_len=128,
                         random_range_ratio=1.0, tokenize_prompt=True, max_concurrency=concurrency, flush_cache=False,
                         keep_alive=args.keep_alive)
    cpu = time.process_time()
    record = run_benchmark(config, echo=lambda line: print(f"    bench: {line}", file=sys.stderr))
    cpu = time.process_time() - cpu
    chunks = sum(len(c) + 1 for c, e in zip(record["chunk_itls"], record["errors"], strict=False) if not e)
    row = {"client": "specsuite", "concurrency": concurrency, "chunks_per_s": chunks / record["duration"], "client_cpu_s": cpu,
           "client_cpu_fraction": cpu / record["duration"], "median_itl_ms": record["median_itl_ms"],
           "output_throughput": record["output_throughput"], "failed": record["failed"]}
    if args.sglang_python:
        row["bench_serving"] = bench_serving_level(url, config, args.sglang_python, tmp)
    return row


def run_bench_serving(python: str, url: str, config, out_file: Path) -> float:
    """Run sglang.benchmark.serving once; return its CPU seconds (children's rusage delta)."""
    command = [python, "-m", "sglang.benchmark.serving", "--backend", "sglang", "--base-url", url, "--dataset-name", "random-ids",
               "--tokenize-prompt", "--random-input-len", str(config.random_input_len), "--random-output-len", str(config.random_output_len),
               "--random-range-ratio", "1.0", "--num-prompts", str(config.num_prompts), "--max-concurrency", str(config.max_concurrency),
               "--tokenizer", str(ROOT / "specsuite/refserver/model"), "--output-file", str(out_file), "--disable-tqdm"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, cwd=tempfile.gettempdir(), capture_output=True, timeout=900, check=True,
                   preexec_fn=pin_this_process)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def bench_serving_level(url: str, config, python: str, tmp: Path) -> dict[str, Any]:
    from dataclasses import replace

    startup = run_bench_serving(python, url, replace(config, num_prompts=1, random_output_len=1, max_concurrency=1), tmp / "startup.jsonl")
    out_file = tmp / f"bench_serving_{config.max_concurrency}.jsonl"
    cpu = run_bench_serving(python, url, config, out_file)
    line = json.loads(out_file.read_text().splitlines()[-1])
    chunks_estimate = line["total_output_tokens"] / (line.get("accept_length") or 1.0)
    return {"concurrency": config.max_concurrency, "net_cpu_s": cpu - startup, "startup_cpu_s": startup,
            "chunks_per_s_estimate": chunks_estimate / line["duration"], "cpu_fraction": (cpu - startup) / line["duration"],
            "median_itl_ms": line["median_itl_ms"], "output_throughput": line["output_throughput"]}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    pin_this_process(CLIENT_CPU)
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; client on CPU {CLIENT_CPU}, server on CPU {SERVER_CPU}", flush=True)
    levels = [int(x) for x in args.levels.split(",") if x.strip()]
    result: dict[str, Any] = {"load_at_start": load, "args": vars(args), "emitter": []}
    for step in (args.step_ms, 0.0):
        print(f"emitter, step {step:g} ms ({'paced' if step else 'flood'}), {args.tokens} chunks per stream:", flush=True)
        for concurrency in levels:
            row = emitter_level(concurrency, step, args)
            print_emitter_row(row)
            result["emitter"].append(row)
    sustained = [r["received_chunks_per_s"] for r in result["emitter"] if r["sustained"]]
    best = max((r for r in result["emitter"] if r["sustained"]), key=lambda r: r["received_chunks_per_s"], default=None)
    flood = [r["received_chunks_per_s"] for r in result["emitter"] if not r["step_ms"]]
    errors = [r for r in result["emitter"] if r["sustained"]]
    result["summary"] = {
        "highest_sustained_chunks_per_s": max(sustained) if sustained else None,
        "highest_sustained_at": None if best is None else {k: best[k] for k in ("concurrency", "step_ms", "client_cpu_fraction",
                                                                                  "timestamp_error_p50_ms", "timestamp_error_p99_ms")},
        "flood_received_chunks_per_s": max(flood) if flood else None,
        "client_chunks_per_cpu_s_max": max((r["client_chunks_per_cpu_s"] or 0 for r in result["emitter"]), default=None),
        "timestamp_error_p50_ms_worst_sustained": max((r["timestamp_error_p50_ms"] for r in errors), default=None),
        "timestamp_error_p99_ms_worst_sustained": max((r["timestamp_error_p99_ms"] for r in errors), default=None),
    }
    print("summary:", json.dumps(result["summary"]), flush=True)
    if args.refserver:
        tmp = Path(tempfile.mkdtemp(prefix="client-overhead-"))
        server = launch_reference_server("fix", log_dir=tmp, extra_args=["--step-time-ms", str(args.refserver_step_ms), "--max-running-requests", "256"])
        pin_process(server.pid, SERVER_CPU)
        result["refserver"] = []
        try:
            print(f"reference server, step {args.refserver_step_ms:g} ms:", flush=True)
            for concurrency in (int(x) for x in args.refserver_levels.split(",") if x.strip()):
                row = refserver_level(server.base_url, concurrency, args, tmp)
                result["refserver"].append(row)
                print(f"  c={concurrency:>4} {row['chunks_per_s']:8.0f} chunks/s, client CPU {row['client_cpu_fraction']:.0%}, "
                      f"median ITL {row['median_itl_ms']:.3f} ms, {row['output_throughput']:.0f} tok/s", flush=True)
                if "bench_serving" in row:
                    other = row["bench_serving"]
                    print(f"         bench_serving: ~{other['chunks_per_s_estimate']:.0f} chunks/s, net CPU {other['cpu_fraction']:.0%}, "
                          f"median ITL {other['median_itl_ms']:.3f} ms, {other['output_throughput']:.0f} tok/s", flush=True)
        finally:
            server.stop()
    result["load_at_end"] = os.getloadavg()
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
