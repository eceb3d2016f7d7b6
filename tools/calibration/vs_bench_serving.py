"""Do our numbers agree with `sglang.benchmark.serving` (bench_serving) on the same server?

One reference server (step emulation --step-time-ms), bench_serving's workload with identical
requests (random-ids, fixed 1024/512 lengths, token-id prompts, seed 42: our dataset code draws
the same prompts for the same seed), concurrency 1, one warmup per run and no flush on either
side (accept length is not compared). The two
clients alternate in ABBA order for --rounds rounds; per metric (median ITL, median TPOT,
output throughput) the script reports each client's run values, the ratio of geometric means
ours / theirs - 1 with its 95% interval (Welch on log values), and whether it is within
--tolerance (default 2%).

    .venv/bin/python tools/calibration/vs_bench_serving.py --sglang-python /tmp/sglvenv/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere

from specsuite.analysis.verdicts import compare_run_values  # noqa: E402
from specsuite.families.bench.runner import BenchConfig, run_benchmark  # noqa: E402
from specsuite.results.types import Effect  # noqa: E402
from specsuite.server.launcher import launch_reference_server  # noqa: E402

METRICS = ("median_itl_ms", "median_tpot_ms", "output_throughput", "mean_itl_ms", "median_ttft_ms", "accept_length")
COMPARED = ("median_itl_ms", "median_tpot_ms", "output_throughput")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sglang-python", default="/tmp/sglvenv/bin/python", help="python of an environment with sglang installed")
    parser.add_argument("--step-time-ms", type=float, default=2.56)
    parser.add_argument("--num-prompts", type=int, default=8)
    parser.add_argument("--input-len", type=int, default=1024)
    parser.add_argument("--output-len", type=int, default=512)
    parser.add_argument("--max-concurrency", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=4, help="ABBA rounds; each round runs both clients once")
    parser.add_argument("--tolerance", type=float, default=0.02)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out", default=None)
    return parser.parse_args(argv)


def ours(url: str, args: argparse.Namespace) -> dict[str, Any]:
    config = BenchConfig(base_url=url, dataset_name="random-ids", num_prompts=args.num_prompts, random_input_len=args.input_len,
                         random_output_len=args.output_len, random_range_ratio=1.0, tokenize_prompt=True,
                         max_concurrency=args.max_concurrency, flush_cache=False, seed=args.seed)
    record = run_benchmark(config, echo=lambda line: print(f"  specsuite: {line}", file=sys.stderr))
    return {key: record[key] for key in METRICS}


def theirs(url: str, args: argparse.Namespace, work: Path, index: int) -> dict[str, Any]:
    out_file = work / f"bench_serving_{index}.jsonl"
    command = [args.sglang_python, "-m", "sglang.benchmark.serving", "--backend", "sglang", "--base-url", url,
               "--dataset-name", "random-ids", "--tokenize-prompt", "--random-input-len", str(args.input_len),
               "--random-output-len", str(args.output_len), "--random-range-ratio", "1.0", "--num-prompts", str(args.num_prompts),
               "--max-concurrency", str(args.max_concurrency), "--seed", str(args.seed),
               "--tokenizer", str(ROOT / "specsuite/refserver/model"), "--output-file", str(out_file), "--disable-tqdm"]
    done = subprocess.run(command, cwd=work, capture_output=True, text=True, timeout=1200, check=False, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if done.returncode != 0 or not out_file.exists():
        raise SystemExit(f"bench_serving failed ({done.returncode}): {done.stderr.strip().splitlines()[-1:]}")
    line = json.loads(out_file.read_text().splitlines()[-1])
    return {key: line.get(key) for key in METRICS}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="vs-bench-serving-"))
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    server = launch_reference_server("fix", log_dir=work, extra_args=["--step-time-ms", str(args.step_time_ms)])
    runs: dict[str, list[dict[str, Any]]] = {"specsuite": [], "bench_serving": []}
    try:
        for index in range(args.rounds):
            order = ("specsuite", "bench_serving") if index % 2 == 0 else ("bench_serving", "specsuite")
            for client in order:
                run = ours(server.base_url, args) if client == "specsuite" else theirs(server.base_url, args, work, index)
                runs[client].append(run)
                print(f"  round {index + 1} {client:>13}: " + ", ".join(f"{k} {run[k]:.4f}" for k in METRICS if run[k] is not None), flush=True)
    finally:
        server.stop()
    verdicts = {}
    for key in COMPARED:
        a = [r[key] for r in runs["specsuite"]]
        b = [r[key] for r in runs["bench_serving"]]
        row = compare_run_values(a, b, metric=key, threshold=args.tolerance, higher_is_better=key == "output_throughput")
        effect = row.effect or Effect()
        estimate, ci = effect.value, effect.ci
        within = estimate is not None and abs(estimate) <= args.tolerance
        row.put("within_tolerance", within)
        verdicts[key] = row.to_dict()  # written with --out
        if estimate is None or ci is None:
            print(f"{key}: {row.note}")
            continue
        print(f"{key}: ours/theirs - 1 = {estimate:+.3%} [95% CI {ci[0]:+.3%}, {ci[1]:+.3%}]; "
              f"{'within' if within else 'OUTSIDE'} ±{args.tolerance:.0%}"
              f"{'; TOST-equivalent' if row.equivalence is not None and row.equivalence.equivalent else ''}", flush=True)
    load_end = os.getloadavg()
    print(f"load average at end: {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f}")
    if args.out:
        Path(args.out).write_text(json.dumps({"args": vars(args), "load_start": load, "load_end": load_end, "runs": runs,
                                              "verdicts": verdicts}, indent=2))
        print(f"wrote {args.out}")
    return 0 if all(v["within_tolerance"] for v in verdicts.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
