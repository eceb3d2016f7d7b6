"""The serving-benchmark family ("bench"): median ITL and output throughput.

Records: a repeat's benchmark summaries (`workloads.bench`, one run or a list of them; specsuite.families.bench),
at the setting their `config` records.  Verdict rule ("run_level"): two or more repeats per
arm: Welch's t on log run-level values with TOST within the threshold, beside the rank-based pair one
disturbed run cannot swing; one run per arm with per-token ITLs: a bootstrap interval of the relative
median difference with the Mann–Whitney p-value.
"""

from __future__ import annotations

import numpy as np

from specsuite.compare.engines import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    POWER,
    Pending,
    equivalence_entry,
    log_sd,
    relative_mde,
    run_level,
)
from specsuite.compare.metric import Metric
from specsuite.compare.series import CONFIDENCE, CaseRuns, interval, num, per_token_values, run_values
from specsuite.families.bench.driver import BenchDriver
from specsuite.families.bench.options import OPTIONS, BenchSettings
from specsuite.families.bench.records import BenchRun, bench_runs
from specsuite.families.workload_family import FamilyFailure, FamilyRecord, FamilyView, VerdictRule, WorkloadFamily, setting_record, workloads_of
from specsuite.results.types import ECDF, ArmCounts, ComparisonRow, EcdfPanel, Effect, FigureSpec, Mde, Repeat, Workloads, case_title, fmt
from specsuite.stats import mann_whitney, relative_median_diff_ci, tost_equivalence


def _median_itl(run: BenchRun) -> float | None:
    if run.median_itl_ms is not None:
        return float(run.median_itl_ms)
    itls = run.itl_gaps_ms()
    return float(np.median(itls)) if itls else None


def _output_throughput(run: BenchRun) -> float | None:
    return run.output_throughput


METRICS: tuple[Metric, ...] = (
    Metric("itl_median", "median ITL", "ms", "lower", 0.01, "relative", "run_level", "bench", "run_value", _median_itl,
           "median ITL", "ms", per_token=BenchRun.itl_gaps_ms, plot_title="Median ITL", version=2),  # 2: one stamp per SSE event, zeros kept
    Metric("output_throughput", "output throughput", "tok/s", "higher", 0.01, "relative", "run_level", "bench", "run_value",
           _output_throughput, "output throughput", "tok_s", plot_title="Output throughput"),
)
UNITS = {"itl_median": " ms", "output_throughput": " tok/s"}  # the verdict line's units


def _compare_bench(metric: Metric, cand: CaseRuns, base: CaseRuns, threshold: float, row: ComparisonRow) -> Pending | None:
    a_runs, b_runs = [v for _, v in run_values(cand, metric)], [v for _, v in run_values(base, metric)]
    if not a_runs or not b_runs:
        return None
    higher_is_better = metric.higher_is_better
    row.update(candidate_value=float(np.median(a_runs)), baseline_value=float(np.median(b_runs)),
               n=ArmCounts.written(candidate=len(a_runs), baseline=len(b_runs), unit="repeats"))
    if len(a_runs) >= 2 and len(b_runs) >= 2 and min(a_runs + b_runs) > 0:
        return run_level(a_runs, b_runs, threshold, row, higher_is_better=higher_is_better)
    a_tokens, b_tokens = per_token_values(cand, metric), per_token_values(base, metric)
    if len(a_tokens) < 2 or len(b_tokens) < 2:
        row.update(p_value=None, test="none", effect=Effect.written(name="relative difference", scale="relative",
                                                                    value=num(row.candidate_value / row.baseline_value - 1.0)
                                                                    if row.baseline_value else None, ci=None),
                   mde=Mde.written(scale="relative", value=None, power=POWER, note="needs two or more repeats per arm"),
                   note="one run per arm and no per-token data: needs two or more repeats per arm for a test")
        return None
    zeros = sum(1 for x in (*a_tokens, *b_tokens) if x <= 0)
    if zeros:  # a relative (log-scale) comparison needs positive gaps; zeros come only from a client that stamps once per network read
        row.update(candidate_value=float(np.median(a_tokens)), baseline_value=float(np.median(b_tokens)), p_value=None, test="none",
                   effect=Effect.written(name="relative median difference", scale="relative", value=None, ci=None),
                   mde=Mde.written(scale="relative", value=None, power=POWER, note="zero gaps"),
                   note=f"{zeros} zero inter-token gaps: a client that gave every event of one network read the same time "
                        "(results before ITL definition 2); rerun the benchmark for a test")
        return None
    boot = relative_median_diff_ci(a_tokens, b_tokens, confidence=CONFIDENCE, n_resamples=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED)
    equivalence = tost_equivalence(a_tokens, b_tokens, margin=threshold, relative=True, alpha=1 - CONFIDENCE) if threshold else None
    row.update(candidate_value=float(np.median(a_tokens)), baseline_value=float(np.median(b_tokens)),
               p_value=mann_whitney(a_tokens, b_tokens).p_value,
               test="Mann–Whitney U on per-token ITLs; bootstrap relative median difference" + (" + TOST" if equivalence else ""),
               effect=Effect.written(name="relative median difference", scale="relative", value=boot.estimate,
                                     ci=interval(boot.ci)),
               n=ArmCounts.written(candidate=len(a_tokens), baseline=len(b_tokens), unit="inter-token gaps"),
               mde=relative_mde(log_sd(a_tokens, b_tokens), len(a_tokens), len(b_tokens), threshold, repeats=False),
               note="one run per arm: the p-value says these two runs differ")
    if equivalence is not None:
        row.update(equivalence=equivalence_entry(threshold, equivalence))
    return Pending(row, boot.estimate, boot.ci, threshold, higher_is_better, equivalence)


RULES = (
    VerdictRule("run_level", "repeats: Welch t on log run-level values with TOST within the threshold, and the rank-based pair "
                             "(Mann–Whitney, Hodges–Lehmann); one run: Mann–Whitney and a bootstrap relative median difference "
                             "on per-token values", _compare_bench),
)


def _records(repeat: Repeat) -> list[FamilyRecord]:
    return [setting_record(*run.setting(), run) for run in bench_runs(workloads_of(repeat))]


def _state(view: FamilyView, arm: str) -> str:
    """The first setting's median ITL and output throughput."""
    by_metric = view.arm_estimates(arm)
    parts = []
    for metric in METRICS:
        values = [r.value for r in by_metric.get(metric.name, []) if r.value is not None]
        if values:
            parts.append(f"{metric.short or metric.label} {fmt(values[0], 4)}{UNITS[metric.name]}")
    return ", ".join(parts)


def _itl_panels(view: FamilyView) -> list[EcdfPanel]:
    """A panel per sampling setting: each arm's per-token ITLs in ms, pooled over repeats (settings with none left out)."""
    pooled: dict[str, dict[str, list[float]]] = {}
    for arm_name, arm in view.document.arms.items():
        for repeat in arm.repeats:
            for run in bench_runs(workloads_of(repeat)):
                key = case_title(run.temperature(), run.top_p())
                values = [x * 1000.0 for request in run.itls or [] for x in request or [] if x and x > 0]
                pooled.setdefault(key, {}).setdefault(arm_name, []).extend(values)
    return [EcdfPanel(title=f"ITL ECDF, {key}", series=arms) for key, arms in pooled.items() if any(arms.values())]


def _figures(view: FamilyView) -> list[FigureSpec]:
    return [FigureSpec(kind=ECDF, file="itl_ecdf.png", title="Inter-token latency ECDF",
                       caption="Per-token ITLs pooled over repeats; dashed lines are the medians.", place=40, when_run=True,
                       absent_note="ITL ECDF: not drawn, the bench results carry no per-token ITLs (`itls`).",
                       x_label="inter-token latency (ms), up to the 99.5th percentile", y_label="fraction of tokens ≤ x",
                       unit="ms", panels=_itl_panels(view))]


def _failures(repeats: list[Workloads]) -> list[FamilyFailure]:
    """The serving benchmark's failed requests over an arm's repeats, as one line."""
    runs = [run for workloads in repeats for run in bench_runs(workloads)]
    failed = sum(int(run.failed or 0) for run in runs)
    if not failed:
        return []
    total = failed + sum(int(run.completed or 0) for run in runs)
    return [FamilyFailure("benchmark_errors", failed, f"{failed} of {total} serving-benchmark requests failed (see the session log)")]


FAMILY = WorkloadFamily(
    name="bench", label="serving benchmark", results_key="workloads.bench", suite_module="test_serving_bench",
    records=_records, metrics=METRICS, verdict_rules=RULES, state=_state, report_rows=("itl_median", "output_throughput"),
    spread_rows=("itl_median", "output_throughput"), reported_when_absent=True, where_in_line=False,
    # options, settings and nightly rules
    options=OPTIONS, settings=BenchSettings,
    main_job_markers="perf", main_job_part="gsm8k and bench",
    failures=_failures,
    # workload driver, pytest marker and fixtures
    driver=BenchDriver, marker=("perf", "serving benchmark comparisons"), pytest_plugin="specsuite.pytest_plugin.bench",
    # report figures and records (results side)
    figures=_figures,
)
