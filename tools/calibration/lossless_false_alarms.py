"""False-alarm rate of the lossless tests on a correct (fix-arm) server: the suite's stochastic
tests (PIT per setting, two-sample chi-square and log-likelihood calibration per setting) run
`--runs` times with different seeds, and the rejection counts are tested against alpha with an
exact binomial test (H1: the rate exceeds alpha) and a Clopper-Pearson 95% interval. The
component p-values are also checked for uniformity (KS), which is informative even when alpha
is too small for 20 runs to show anything. Greedy equality is deterministic and not repeated.

    .venv/bin/python tools/calibration/lossless_false_alarms.py --out /tmp/lossless_false_alarms.json

Without URLs it launches the reference server's fix arm (the server under test) and the same
server with `--speculative-algorithm NONE` (the reference), and stops both at the end.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from scipy import stats

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere

from specsuite.errors import SpecsuiteError  # noqa: E402
from specsuite.families.correctness.prompts import load_prompts  # noqa: E402
from specsuite.families.lossless.options import lossless_settings  # noqa: E402
from specsuite.families.lossless.reference import SPECULATION_OFF_ARGS  # noqa: E402
from specsuite.families.lossless.workload import LosslessConfig, LosslessWorkload, draft_steps_of  # noqa: E402
from specsuite.server.kinds.sglang.client import SGLangClient  # noqa: E402
from specsuite.server.launcher import launch_reference_server  # noqa: E402
from specsuite.stats import clopper_pearson  # noqa: E402

DEFAULTS = LosslessConfig()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="runs, with seeds first-seed .. first-seed+runs-1 (default 20)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--server-url", default=None, help="server under test (default: launch the fix arm)")
    parser.add_argument("--reference-url", default=None, help="speculation-off reference (default: launch one)")
    parser.add_argument("--alpha", type=float, default=DEFAULTS.alpha, help=f"the suite's alpha (default {DEFAULTS.alpha:g})")
    parser.add_argument("--report-alphas", default="0.01,0.05", help="further alphas to count rejections at (default 0.01,0.05)")
    parser.add_argument("--lossless-temperatures", default="1.0,0.7:0.9")
    parser.add_argument("--lossless-samples", type=int, default=DEFAULTS.pit_requests)
    parser.add_argument("--lossless-two-sample-size", type=int, default=DEFAULTS.two_sample_size)
    parser.add_argument("--skip-two-sample", action="store_true", help="run the PIT only")
    parser.add_argument("--out", default=None, help="write the summary and every run's p-values as JSON here")
    return parser.parse_args(argv)


def one_run(workload: LosslessWorkload, two_sample: bool) -> dict[str, dict[str, float]]:
    """Every stochastic test's decision p-value and its component p-values, by test name."""
    tests: dict[str, dict[str, float]] = {}
    for index, setting in enumerate(workload.config.settings):
        pit = workload.pit(setting, index).test
        tests[f"pit {setting.key}"] = {"p": pit.p_value, "ks": pit.ks_p, "chi2": pit.chi2_p}
        if two_sample:
            result = workload.two_sample(setting, index)
            homogeneity = result.homogeneity
            tests[f"two-sample {setting.key}"] = {"p": homogeneity.p_value, **{f"position {pos}": p for pos, p in
                                                   zip(homogeneity.positions, homogeneity.p_values, strict=False)}}
            calibration = result.calibration.p_value
            tests[f"calibration {setting.key}"] = {"p": calibration, "z": calibration}
    return tests


def rejection_summary(p_values: list[float], alpha: float) -> dict[str, Any]:
    """Rejections at alpha among the runs, the exact 95% CI of the rate and the binomial test."""
    runs, rejected = len(p_values), sum(p < alpha for p in p_values)
    low, high = clopper_pearson(rejected, runs)
    test = stats.binomtest(rejected, runs, min(alpha, 1.0), alternative="greater")
    return {"alpha": alpha, "rejected": rejected, "runs": runs, "rate_ci95": [float(low), float(high)],
            "binomial_p": float(test.pvalue), "consistent": bool(test.pvalue >= 0.05)}


def summarise(runs: list[dict[str, dict[str, float]]], alphas: list[float]) -> dict[str, Any]:
    names = list(runs[0])
    summary: dict[str, Any] = {"tests": {}, "any_test": {}}
    for name in names:
        decisions = [run[name]["p"] for run in runs]
        components = {key: [run[name][key] for run in runs] for key in runs[0][name] if key != "p"}
        summary["tests"][name] = {
            "rejections": [rejection_summary(decisions, alpha) for alpha in alphas],
            "component_uniformity_ks_p": {key: float(stats.kstest(values, "uniform").pvalue) for key, values in components.items()},
        }
    for alpha in alphas:
        # Per run, the chance of any false alarm is at most (number of tests) * alpha (Bonferroni).
        smallest = [min(run[name]["p"] for name in names) for run in runs]
        result = rejection_summary(smallest, alpha)
        bound = min(1.0, len(names) * alpha)
        result.update(bound=bound, binomial_p=float(stats.binomtest(result["rejected"], len(runs), bound, alternative="greater").pvalue))
        result["consistent"] = bool(result["binomial_p"] >= 0.05)
        summary["any_test"][str(alpha)] = result
    return summary


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        alphas = [args.alpha] + [float(a) for a in args.report_alphas.split(",") if a.strip()]
    except ValueError:
        print(f"error: --report-alphas expects numbers, got {args.report_alphas!r}", file=sys.stderr)
        return 2
    launched = []
    log_dir = Path(tempfile.mkdtemp(prefix="lossless-bench-"))
    try:
        test_url = args.server_url
        if not test_url:
            launched.append(launch_reference_server("fix", log_dir=log_dir))
            test_url = launched[-1].base_url
        reference_url = args.reference_url
        if not reference_url and not args.skip_two_sample:
            launched.append(launch_reference_server("fix", log_dir=log_dir, extra_args=SPECULATION_OFF_ARGS))
            reference_url = launched[-1].base_url
        test = SGLangClient(test_url)
        reference = SGLangClient(reference_url) if reference_url else None
        draft_steps = draft_steps_of(test.server_info())
        prompts = [p.prompt for p in load_prompts()]
        runs = []
        for seed in range(args.first_seed, args.first_seed + args.runs):
            settings = tuple(lossless_settings(args.lossless_temperatures, "--lossless-temperatures"))
            config = LosslessConfig(settings=settings, pit_requests=args.lossless_samples, two_sample_size=args.lossless_two_sample_size,
                                    alpha=args.alpha, seed=seed)
            started = time.perf_counter()
            run = one_run(LosslessWorkload(test, reference, prompts, config, draft_steps), not args.skip_two_sample)
            runs.append(run)
            shown = ", ".join(f"{name} p={values['p']:.3g}" for name, values in run.items())
            print(f"seed {seed} ({time.perf_counter() - started:.0f} s): {shown}", flush=True)
    except SpecsuiteError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        for server in launched:
            server.stop()
    summary = summarise(runs, alphas)
    for name, entry in summary["tests"].items():
        counts = "; ".join(f"{r['rejected']}/{r['runs']} at alpha {r['alpha']:g} (95% CI {r['rate_ci95'][0]:.3f}-{r['rate_ci95'][1]:.3f}, "
                           f"binomial p={r['binomial_p']:.3g})" for r in entry["rejections"])
        uniform = ", ".join(f"{k} {v:.2g}" for k, v in entry["component_uniformity_ks_p"].items())
        print(f"{name}: {counts}; p-value uniformity KS p: {uniform or '-'}")
    for alpha, entry in summary["any_test"].items():
        print(f"any test at alpha {alpha}: {entry['rejected']}/{entry['runs']} runs (bound {entry['bound']:.3g}, binomial p={entry['binomial_p']:.3g})")
    if args.out:
        Path(args.out).write_text(json.dumps({"args": vars(args), "summary": summary, "runs": runs}, indent=2))
    consistent = all(r["consistent"] for entry in summary["tests"].values() for r in entry["rejections"][:1])
    return 0 if consistent else 1


if __name__ == "__main__":
    sys.exit(main())
