"""Can the A/B resolve a 0.4% cost (the reported cost of copying `draft_probs` out of the graph pool)? Two
reference-server arms that differ only in `--step-time-ms`, benchmarked in interleaved repeats, compared on
run-level values.

    .venv/bin/python tools/calibration/step_time_ab.py                       # 2.56 vs 2.57, then 2.56 vs 2.56
    .venv/bin/python tools/calibration/step_time_ab.py --step-a 10 --step-b 10.04 --pilot-repeats 4 --max-repeats 16
                                                                 # the same 0.4% where the step clock holds

Procedure: a pilot of `--pilot-repeats` interleaved runs per arm (a fresh server per run, so the
between-run spread includes the process) measures the spread of each metric's log run-level
values; `specsuite.stats.repeats_needed_for_mde(spread, --target-effect)` gives the runs per arm
each metric needs to detect the difference (80% power, two-sided alpha 0.05), the metrics in
--size-by (default TPOT, output throughput and the median chunk gap) set the plan, and the
script runs the remaining ones (pilot runs count; capped at --max-repeats). `--size-with robust` sizes from
1.4826 MAD instead of the sd, divided by Mann-Whitney's efficiency (0.955). Median per-token ITL is by far the noisiest metric: its samples are
chunk gaps split g/k, a mixture of clusters at step/k, and the median sits between two clusters
where every jittered gap moves it; TPOT, output throughput and the median chunk gap (ITL not
split per token) are not. Verdicts per metric: Welch's t on log run values (estimate = ratio of
geometric means - 1 with its 95% CI) and TOST within ±--margin, and beside them the rank-based
pair (Mann-Whitney, Hodges-Lehmann shift with its exact interval). Then the same for an A-A pair
(both arms at --step-a), sized for the margin, and Holm across the metrics for each test.

Workload: bench_serving's random-ids 1024/512, range ratio 1.0 (fixed lengths), token-id
prompts, concurrency 1, greedy, one warmup and a flush per run (the shape of the reported
measurement of the copy's cost). With --step-time-ms the reference server runs its engine in its own process, computes steps
ahead of an emulated device clock and publishes each at its deadline (specsuite/refserver/
step_clock.py). It can only pad: when the host falls behind the clock (a busy machine), the
step ends late and the run measures a slower server than configured. The server counts those
slips (/metrics, specsuite_refserver:emulated_*); a run whose clock slipped more than
--max-clock-slip of its device time is disturbed: it is set aside, reported, and run again (up to
--max-reruns), and the comparison is repeated with the set-aside runs put back, as a check that
setting them aside did not make the verdict.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere

from specsuite.analysis.verdicts import compare_run_values, describe_run_level  # noqa: E402
from specsuite.compare.engines import log_sd, robust_log_sd  # noqa: E402
from specsuite.errors import SpecsuiteError  # noqa: E402
from specsuite.families.bench.runner import BenchConfig, run_benchmark  # noqa: E402
from specsuite.results.types import ComparisonRow  # noqa: E402
from specsuite.server.counters import parse_prometheus  # noqa: E402
from specsuite.server.launcher import launch_reference_server  # noqa: E402
from specsuite.stats import holm, repeats_needed_for_mde  # noqa: E402

MANN_WHITNEY_EFFICIENCY = 0.955  # its asymptotic efficiency relative to the t test on normal data
METRICS = ("median_itl_ms", "median_tpot_ms", "output_throughput", "median_chunk_itl_ms")
HIGHER_IS_BETTER = ("output_throughput",)  # of METRICS; the rest are latencies
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
    parser.add_argument("--size-with", choices=("sd", "robust"), default="sd",
                        help="spread that sizes the runs: sd (default) or robust (1.4826 MAD, with Mann-Whitney's efficiency)")
    parser.add_argument("--max-clock-slip", type=float, default=0.001,
                        help="a run whose emulated clock slipped more than this fraction of its device time is disturbed "
                             "and run again (default 0.001)")
    parser.add_argument("--max-reruns", type=int, default=None, help="cap on disturbed runs re-run per experiment (default: --max-repeats)")
    parser.add_argument("--skip-aa", action="store_true", help="skip the A-A equivalence part")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out", default=None, help="write all runs and verdicts here as JSON")
    args = parser.parse_args(argv)
    if args.max_clock_slip < 0 or (args.max_reruns is not None and args.max_reruns < 0):
        parser.error("--max-clock-slip and --max-reruns must not be negative")
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
        before = emulated_clock_counters(server.base_url)
        record = run_benchmark(config, echo=lambda line: print(f"  bench: {line}", file=sys.stderr))
        after = emulated_clock_counters(server.base_url)
    finally:
        server.stop()
    run = {key: record[key] for key in SCALARS}
    run["step_time_ms"] = step_ms
    run.update({key: after[key] - before[key] for key in after})
    run["disturbed"] = run["clock_late_ms"] > args.max_clock_slip * run["clock_steps"] * step_ms
    print(f"  step {step_ms:g} ms: median ITL {run['median_itl_ms']:.4f} ms, median TPOT {run['median_tpot_ms']:.4f} ms, "
          f"{run['output_throughput']:.2f} tok/s, median chunk gap {run['median_chunk_itl_ms']:.3f} ms; "
          f"clock slipped {run['clock_late_ms']:.1f} ms in {run['clock_late_steps']} of {run['clock_steps']} steps"
          f"{' - disturbed, run again' if run['disturbed'] else ''}", flush=True)
    return run


def emulated_clock_counters(base_url: str) -> dict[str, Any]:
    """The server's emulated-clock counters: steps run, and those its host computed after their
    deadline (read before and after a run; the difference is the run's)."""
    with urllib.request.urlopen(f"{base_url}/metrics", timeout=10) as response:
        values = parse_prometheus(response.read().decode())
    return {"clock_steps": int(values.get("specsuite_refserver:emulated_steps_total", 0)),
            "clock_late_steps": int(values.get("specsuite_refserver:emulated_steps_late_total", 0)),
            "clock_late_ms": 1000.0 * values.get("specsuite_refserver:emulated_late_seconds_total", 0.0)}


def interleave(arms: dict[str, float], runs: dict[str, list[dict[str, Any]]], disturbed: list[dict[str, Any]], until: int,
               args: argparse.Namespace, log_dir: Path) -> None:
    """Run A B A B ... until every arm has `until` undisturbed runs. A run the host could not hold
    the emulated clock for (it measured a slower server than configured) is set aside and run
    again at once, up to --max-reruns per experiment; after that disturbed runs are kept."""
    rerun_cap = args.max_repeats if args.max_reruns is None else args.max_reruns
    while min(len(r) for r in runs.values()) < until:
        for name, step in arms.items():
            while len(runs[name]) < until:
                run = one_run(step, args, log_dir)
                if run["disturbed"] and len(disturbed) < rerun_cap:
                    disturbed.append({"arm": name, **run})
                    continue
                runs[name].append(run)
                break


def compare_records(candidate: list[dict[str, Any]], baseline: list[dict[str, Any]], *, margin: float,
                    target_effect: float) -> dict[str, ComparisonRow]:
    """The A/B engine's run-level comparison of each of METRICS over the runs' records."""
    return {key: compare_run_values([r[key] for r in candidate if r.get(key) is not None],
                                    [r[key] for r in baseline if r.get(key) is not None], metric=key, threshold=margin,
                                    higher_is_better=key in HIGHER_IS_BETTER, target_effect=target_effect)
            for key in METRICS}


def experiment(label: str, arms: dict[str, float], target: float, args: argparse.Namespace, log_dir: Path) -> dict[str, Any]:
    """Pilot, size by the MDE, complete the runs, compare. The first arm is the candidate."""
    print(f"\n== {label}: {' vs '.join(f'{n} ({s:g} ms)' for n, s in arms.items())}", flush=True)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in arms}
    disturbed: list[dict[str, Any]] = []
    started = time.monotonic()
    interleave(arms, runs, disturbed, args.pilot_repeats, args, log_dir)
    pilot = {}
    for key in METRICS:
        values = [[r[key] for r in arm_runs] for arm_runs in runs.values()]
        sd, robust = log_sd(*values), robust_log_sd(*values)
        spread = robust if args.size_with == "robust" else sd
        # Mann-Whitney needs 1/0.955 the runs of a t test on normal data (its efficiency there).
        needed = repeats_needed_for_mde(spread, target) if spread else args.pilot_repeats
        if args.size_with == "robust":
            needed = math.ceil(needed / MANN_WHITNEY_EFFICIENCY)
        pilot[key] = {"sd_log": sd, "robust_sd_log": robust, "repeats_needed": needed}
        print(f"  pilot {key}: between-run sd of log values {sd:.4%} (robust {robust:.4%}); {needed} runs per arm needed "
              f"for {target:.2%} by the {args.size_with} spread (80% power, alpha 0.05)", flush=True)
    needed = max(pilot[key]["repeats_needed"] for key in args.size_by.split(","))
    planned = min(max(needed, args.pilot_repeats), args.max_repeats)
    print(f"  sized by {args.size_by}: {needed} runs per arm; running {planned}"
          f"{' (capped by --max-repeats)' if planned < needed else ''}", flush=True)
    interleave(arms, runs, disturbed, planned, args, log_dir)
    candidate, baseline = (runs[name] for name in arms)
    comparison = compare_records(candidate, baseline, margin=args.margin, target_effect=target)
    for row in comparison.values():
        print("  " + describe_run_level(row), flush=True)
    family = holm_across_metrics(comparison)
    for test, adjusted in family.items():
        print(f"  Holm across the {len(adjusted)} metrics ({test}): " + ", ".join(
            f"{key} p_adj={p:.3g}{' (rejects)' if reject else ''}" for key, (p, reject) in adjusted.items()), flush=True)
    for name in arms:
        again = [r for r in disturbed if r["arm"] == name]
        kept = sum(r["disturbed"] for r in runs[name])
        print(f"  {name}: {len(again)} disturbed run(s) set aside and run again"
              + (f" (clock slipped {', '.join(format(r['clock_late_ms'], '.0f') for r in again)} ms)" if again else "")
              + (f"; {kept} disturbed run(s) kept after --max-reruns" if kept else ""), flush=True)
    with_disturbed = None
    if disturbed:
        # The sensitivity check: the same comparison with the set-aside runs put back.
        everything = {name: runs[name] + [r for r in disturbed if r["arm"] == name] for name in arms}
        with_disturbed = compare_records(*(everything[name] for name in arms), margin=args.margin, target_effect=target)
        print("  with the disturbed runs put back (rank-based; Welch is swamped by them):", flush=True)
        for key, row in with_disturbed.items():
            print(f"    {key}: " + describe_run_level(row).split("\n")[-1].strip(), flush=True)
    emulation = [r["median_chunk_itl_ms"] / r["step_time_ms"] for arm in runs.values() for r in arm]
    inactive = min(emulation) > 1.2
    if inactive:
        print(f"  WARNING: median chunk gap is {min(emulation):.2f}x the step time or more: the engine's own step is slower than "
              "--step-time-ms here, so the pad is inactive and both arms run at compute speed", flush=True)
    return {"label": label, "arms": arms, "runs": runs, "disturbed_runs": disturbed, "pilot": pilot, "sized_by": args.size_by,
            "size_with": args.size_with, "repeats_needed": needed, "repeats_run": planned, "comparison": _written(comparison),
            "holm": family, "comparison_with_disturbed": None if with_disturbed is None else _written(with_disturbed),
            "emulation_inactive": inactive, "wall_s": time.monotonic() - started}


def _written(comparison: dict[str, ComparisonRow]) -> dict[str, dict[str, Any]]:
    """The rows as the JSON output holds them."""
    return {key: row.to_dict() for key, row in comparison.items()}


def holm_across_metrics(comparison: dict[str, ComparisonRow]) -> dict[str, dict[str, tuple[float, bool]]]:
    """Holm-adjusted p-values across the metrics, separately for Welch and for Mann-Whitney."""
    family = {}
    for test, p_of in (("Welch", lambda row: row.p_value), ("Mann-Whitney", lambda row: row.rank.p_value if row.rank is not None else None)):
        p_values = {key: p for key, row in comparison.items() if (p := p_of(row)) is not None}
        if p_values:
            family[test] = holm(p_values).by_name()
    return family


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    log_dir = Path(tempfile.mkdtemp(prefix="step-time-ab-"))
    try:
        results = [experiment("A/B", {"candidate": args.step_b, "baseline": args.step_a}, args.target_effect, args, log_dir)]
        if not args.skip_aa:
            results.append(experiment("A/A", {"candidate": args.step_a, "baseline": args.step_a}, args.margin, args, log_dir))
    except (SpecsuiteError, OSError) as exc:  # a server that would not start or answer /metrics
        print(f"step_time_ab: {exc} (server logs in {log_dir})", file=sys.stderr)
        return 2
    if args.out:
        Path(args.out).write_text(json.dumps({"args": vars(args), "experiments": results}, indent=2))
        print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
