"""Can the A/B resolve the seed's 0.4% cost? Two reference-server arms that differ only in
`--step-time-ms`, benchmarked in interleaved repeats, compared on run-level values.

    .venv/bin/python bench/step_time_ab.py                       # 2.56 vs 2.57, then 2.56 vs 2.56
    .venv/bin/python bench/step_time_ab.py --step-a 10 --step-b 10.04 --pilot-repeats 4 --max-repeats 16
                                                                 # the same 0.4% where the step clock holds

Procedure: a pilot of `--pilot-repeats` interleaved runs per arm (a fresh server per run, so the
between-run spread includes the process) measures the sd of each metric's log run-level values;
`harness.stats.repeats_needed_for_mde(sd, --target-effect)` gives the runs per arm each metric
needs to detect the difference (80% power, two-sided alpha 0.05), the metrics in --size-by
(default TPOT, output throughput and the median chunk gap) set the plan, and the script runs the remaining ones (pilot runs count;
capped at --max-repeats). Median per-token ITL is by far the noisiest: its samples are
chunk gaps split g/k, a mixture of clusters at step/k, and the median sits between two
clusters where every jittered gap moves it; TPOT, output throughput and the median chunk gap
(ITL not split per token) are not. Verdicts per metric: Welch's t on log run values (estimate =
ratio of geometric means - 1 with its 95% CI) and TOST within ±--margin, and beside them the
rank-based pair (Mann-Whitney, Hodges-Lehmann shift with its exact interval) that one disturbed
run cannot swing. Then the same for an A–A pair (both arms at --step-a), sized with
repeats_needed_for_mde(sd, margin), and Holm across the metrics for each test. Nothing is
pinned: pinning the server to one core made its engine and HTTP threads wait for each other
(TPOT up 2-4%).

Workload: bench_serving's random-ids 1024/512, range ratio 1.0 (fixed lengths), token-id
prompts, concurrency 1, greedy, one warmup and a flush per run (as the issue's measurement).
The step emulation runs decode steps on a clock of --step-time-ms and releases each step's
tokens at its deadline, but it can only pad: when the engine's own step on this CPU (compute
plus the HTTP thread's send) is slower, that step ends late and the two arms differ by less than
their settings do. The script checks the median chunk gap against the step time and says so.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere

from harness.bench.ab import compare_records, describe, log_sd  # noqa: E402
from harness.bench.runner import BenchConfig, run_benchmark  # noqa: E402
from harness.launcher import launch_reference_server  # noqa: E402
from harness.stats import holm, repeats_needed_for_mde  # noqa: E402

METRICS = ("median_itl_ms", "median_tpot_ms", "output_throughput", "median_chunk_itl_ms")
SCALARS = ("median_itl_ms", "mean_itl_ms", "median_tpot_ms", "median_chunk_itl_ms", "output_throughput", "accept_length", "duration", "failed")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--step-a", type=float, default=2.56, help="baseline arm's --step-time-ms (default 2.56)")
    parser.add_argument("--step-b", type=float, default=2.57, help="candidate arm's --step-time-ms (default 2.57)")
    parser.add_argument("--num-prompts", type=int, default=4)
    parser.add_argument("--input-len", type=int, default=1024)
    parser.add_argument("--output-len", type=int, default=512)
    parser.add_argument("--pilot-repeats", type=int, default=3)
    parser.add_argument("--max-repeats", type=int, default=12, help="cap on runs per arm (time budget)")
    parser.add_argument("--size-by", default="median_tpot_ms,output_throughput,median_chunk_itl_ms",
                        help="comma-separated metrics whose pilot spread sets the runs per arm (the largest need wins)")
    parser.add_argument("--target-effect", type=float, default=0.004, help="effect to detect, relative (default 0.004)")
    parser.add_argument("--margin", type=float, default=0.005, help="TOST equivalence margin, relative (default 0.005)")
    parser.add_argument("--skip-aa", action="store_true", help="skip the A-A equivalence part")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out", default=None, help="write all runs and verdicts here as JSON")
    args = parser.parse_args(argv)
    unknown = [key for key in args.size_by.split(",") if key not in METRICS]
    if unknown:
        parser.error(f"--size-by: unknown metric {', '.join(unknown)}; choose from {', '.join(METRICS)}")
    return args


def one_run(step_ms: float, args: argparse.Namespace, log_dir: Path) -> dict[str, Any]:
    """A fresh server at this step time, one benchmark run, the run-level scalars."""
    server = launch_reference_server("fix", log_dir=log_dir, extra_args=["--step-time-ms", str(step_ms)])
    try:
        config = BenchConfig(base_url=server.base_url, dataset_name="random-ids", num_prompts=args.num_prompts,
                             random_input_len=args.input_len, random_output_len=args.output_len, random_range_ratio=1.0,
                             tokenize_prompt=True, max_concurrency=1, flush_cache=True, seed=args.seed)
        record = run_benchmark(config, echo=lambda line: print(f"  bench: {line}", file=sys.stderr))
    finally:
        server.stop()
    run = {key: record[key] for key in SCALARS}
    run["step_time_ms"] = step_ms
    print(f"  step {step_ms:g} ms: median ITL {run['median_itl_ms']:.4f} ms, median TPOT {run['median_tpot_ms']:.4f} ms, "
          f"{run['output_throughput']:.2f} tok/s, median chunk gap {run['median_chunk_itl_ms']:.3f} ms", flush=True)
    return run


def interleave(arms: dict[str, float], runs: dict[str, list[dict[str, Any]]], until: int, args: argparse.Namespace, log_dir: Path) -> None:
    """Run A B A B ... until every arm has `until` runs."""
    while min(len(r) for r in runs.values()) < until:
        for name, step in arms.items():
            if len(runs[name]) < until:
                runs[name].append(one_run(step, args, log_dir))


def experiment(label: str, arms: dict[str, float], target: float, args: argparse.Namespace, log_dir: Path) -> dict[str, Any]:
    """Pilot, size by the MDE, complete the runs, compare. The first arm is the candidate."""
    print(f"\n== {label}: {' vs '.join(f'{n} ({s:g} ms)' for n, s in arms.items())}", flush=True)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in arms}
    started = time.monotonic()
    interleave(arms, runs, args.pilot_repeats, args, log_dir)
    pilot = {}
    for key in METRICS:
        sd = log_sd(*([r[key] for r in arm_runs] for arm_runs in runs.values()))
        pilot[key] = {"sd_log": sd, "repeats_needed": repeats_needed_for_mde(sd, target) if sd else args.pilot_repeats}
        print(f"  pilot {key}: between-run sd of log values {sd:.4%}; {pilot[key]['repeats_needed']} runs per arm needed "
              f"for {target:.2%} (80% power, alpha 0.05)", flush=True)
    needed = max(pilot[key]["repeats_needed"] for key in args.size_by.split(","))
    planned = min(max(needed, args.pilot_repeats), args.max_repeats)
    print(f"  sized by {args.size_by}: {needed} runs per arm; running {planned}"
          f"{' (capped by --max-repeats)' if planned < needed else ''}", flush=True)
    interleave(arms, runs, planned, args, log_dir)
    candidate, baseline = (runs[name] for name in arms)
    comparison = compare_records(candidate, baseline, margin=args.margin, target_effect=target, metrics=METRICS)
    for key, row in comparison.items():
        print("  " + describe(key, row), flush=True)
    family = holm_across_metrics(comparison)
    for test, adjusted in family.items():
        print(f"  Holm across the {len(adjusted)} metrics ({test}): " + ", ".join(
            f"{key} p_adj={p:.3g}{' (rejects)' if reject else ''}" for key, (p, reject) in adjusted.items()), flush=True)
    emulation = [r["median_chunk_itl_ms"] / r["step_time_ms"] for arm in runs.values() for r in arm]
    inactive = min(emulation) > 1.2
    if inactive:
        print(f"  WARNING: median chunk gap is {min(emulation):.2f}x the step time or more: the engine's own step is slower than "
              "--step-time-ms here, so the pad is inactive and both arms run at compute speed", flush=True)
    return {"label": label, "arms": arms, "runs": runs, "pilot": pilot, "sized_by": args.size_by, "repeats_needed": needed,
            "repeats_run": planned, "comparison": comparison, "holm": family, "emulation_inactive": inactive, "wall_s": time.monotonic() - started}


def holm_across_metrics(comparison: dict[str, dict[str, Any]]) -> dict[str, dict[str, tuple[float, bool]]]:
    """Holm-adjusted p-values across the metrics, separately for Welch and for Mann-Whitney."""
    family = {}
    for test, key_p in (("Welch", "p_value"), ("Mann-Whitney", "rank_p_value")):
        p_values = {key: row[key_p] for key, row in comparison.items() if row.get(key_p) is not None}
        if p_values:
            family[test] = holm(p_values).by_name()
    return family


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    log_dir = Path(tempfile.mkdtemp(prefix="step-time-ab-"))
    results = [experiment("A/B", {"candidate": args.step_b, "baseline": args.step_a}, args.target_effect, args, log_dir)]
    if not args.skip_aa:
        results.append(experiment("A/A", {"candidate": args.step_a, "baseline": args.step_a}, args.margin, args, log_dir))
    if args.out:
        Path(args.out).write_text(json.dumps({"args": vars(args), "experiments": results}, indent=2))
        print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
