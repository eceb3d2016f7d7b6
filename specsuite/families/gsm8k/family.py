"""The GSM8K family: accuracy and invalid-answer rate per temperature.

Records: a repeat's GSM8K runs (`workloads.gsm8k`, one per temperature; specsuite.families.gsm8k), each
scored by GSM8K_DEFINITION.  Verdict rules: the accuracy by exact McNemar on questions paired by index
within a repeat; the invalid rate by Fisher's exact test on counts pooled over repeats (from a zero
baseline any rise counts).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from specsuite.compare.engines import POWER, Pending, pooled
from specsuite.compare.metric import Metric
from specsuite.compare.series import CONFIDENCE, CaseRuns, interval, num, proportion_series
from specsuite.errors import SpecsuiteError
from specsuite.families.gsm8k import SYNTHETIC_SOURCE
from specsuite.families.gsm8k.driver import Gsm8kDriver
from specsuite.families.gsm8k.options import MAIN_JOB, OPTIONS, Gsm8kSettings
from specsuite.families.gsm8k.records import Gsm8kRun, Gsm8kScoring, Proportion, gsm8k_runs, gsm8k_sources
from specsuite.families.gsm8k.runner import paired_outcomes
from specsuite.families.workload_family import (
    AbsoluteRule,
    FamilyCaveat,
    FamilyRecord,
    FamilyView,
    RequestTally,
    VerdictRule,
    WorkloadFamily,
    setting_record,
    workloads_of,
)
from specsuite.results.types import ESTIMATES_PER_CASE, ArmCounts, ComparisonRow, Effect, FigureSpec, Mde, Repeat, Workloads, pct
from specsuite.stats import StatsInputError, fisher_exact_2x2, mcnemar_from_pairs, mde_two_proportions

GSM8K_DEFINITION = "sglang"  # the answer-extraction rule the A/B scores GSM8K by


def _gsm8k_counts(pick: Callable[[Gsm8kScoring], Proportion | None]) -> Callable[[Gsm8kRun], tuple[int, int] | None]:
    """(k, n) of one GSM8K proportion (accuracy or invalid rate) under GSM8K_DEFINITION."""
    def extract(run: Gsm8kRun) -> tuple[int, int] | None:
        entry = pick(run.scoring(GSM8K_DEFINITION))
        if entry is None or not entry.n:
            return None
        return int(entry.k or 0), int(entry.n)
    return extract


def _accuracy(scoring: Gsm8kScoring) -> Proportion | None:
    return scoring.accuracy


def _invalid(scoring: Gsm8kScoring) -> Proportion | None:
    return scoring.invalid


METRICS: tuple[Metric, ...] = (
    Metric("gsm8k_accuracy", "GSM8K accuracy", "fraction correct", "higher", 0.02, "difference", "mcnemar", "gsm8k",
           "proportion", _gsm8k_counts(_accuracy), "GSM8K accuracy", "proportion", short="accuracy", axis_label="% correct"),
    Metric("gsm8k_invalid", "GSM8K invalid rate", "fraction invalid", "lower", 0.01, "difference", "fisher", "gsm8k",
           "proportion", _gsm8k_counts(_invalid), "GSM8K invalid rate", "proportion", bad_events=True,
           short="invalid answers", plot_title="GSM8K invalid answers", axis_label="% invalid"),
)


# ---------------------------------------------------------------- verdict rules


def _compare_paired_questions(metric: Metric, cand: CaseRuns, base: CaseRuns, threshold: float, row: ComparisonRow) -> Pending | None:
    a_all: list[bool] = []
    b_all: list[bool] = []
    base_runs = dict(base.runs)
    for number, run in cand.runs:
        other = base_runs.get(number)
        if other is not None and run.has("per_question") and other.has("per_question"):
            try:  # paired_outcomes reads the runs' per-question tables only
                pairs = paired_outcomes({"per_question": run.per_question}, {"per_question": other.per_question}, GSM8K_DEFINITION)
            except SpecsuiteError as exc:  # different shots or data: that repeat cannot be paired
                row.update(note=f"repeat {number} not paired: {exc}")
                continue
            a_all += pairs.a
            b_all += pairs.b
    if not a_all:
        return None
    res = mcnemar_from_pairs(a_all, b_all, confidence=CONFIDENCE)
    p_base = float(np.mean(b_all))
    row.update(candidate_value=float(np.mean(a_all)), baseline_value=p_base, p_value=res.p_value,
               test="exact McNemar (paired by question)",
               effect=Effect.written(name="accuracy difference", scale="difference", value=res.difference,
                                     ci=interval(res.difference_ci)),
               n=ArmCounts.written(candidate=res.n_pairs, baseline=res.n_pairs, unit="paired questions"),
               events=ArmCounts.written(candidate=res.a_only, baseline=res.b_only, unit="discordant pairs"),
               mde=_proportion_mde(res.n_pairs, res.n_pairs, min(p_base, 1.0 - p_base),
                                   "accuracy drop detectable (unpaired approximation, conservative)"))
    return Pending(row, res.difference, res.difference_ci, threshold, metric.higher_is_better)


def _proportion_mde(n1: int, n2: int, p_base: float, note: str) -> Mde:
    # The arcsine scale is symmetric, so a drop from p equals a rise from 1 - p.
    try:
        value = mde_two_proportions(n1, n2, p_base, alpha=1 - CONFIDENCE, power=POWER)
    except StatsInputError as exc:
        return Mde.written(scale="difference", value=None, power=POWER, note=str(exc))
    return Mde.written(scale="difference", value=num(value), power=POWER, note=note)


def _compare_proportions(metric: Metric, cand: CaseRuns, base: CaseRuns, threshold: float, row: ComparisonRow) -> Pending | None:
    totals = pooled(proportion_series(cand, metric), proportion_series(base, metric))
    if totals is None:
        return None
    k1, n1, k2, n2 = (int(v) for v in totals)
    res = fisher_exact_2x2(k1, n1, k2, n2, confidence=CONFIDENCE, odds_ratio_ci=False)
    row.update(candidate_value=k1 / n1, baseline_value=k2 / n2, p_value=res.p_value, test="Fisher's exact test",
               effect=Effect.written(name="risk difference", scale="difference", value=res.risk_difference,
                                     ci=interval(res.risk_difference_ci)),
               n=ArmCounts.written(candidate=n1, baseline=n2, unit="answered questions"),
               events=ArmCounts.written(candidate=k1, baseline=k2),
               mde=_proportion_mde(n1, n2, k2 / n2, "smallest detectable rise in the invalid rate"))
    return Pending(row, res.risk_difference, res.risk_difference_ci, 0.0 if k2 == 0 else threshold, metric.higher_is_better)


RULES = (
    VerdictRule("mcnemar", "exact McNemar on questions paired by index within a repeat; effect = accuracy difference",
                _compare_paired_questions),
    VerdictRule("fisher", "Fisher's exact test on counts pooled over repeats; effect = risk difference", _compare_proportions),
)


# ---------------------------------------------------------------- records and the report's line


def _records(repeat: Repeat) -> list[FamilyRecord]:
    return [setting_record(*run.setting(), run) for run in gsm8k_runs(workloads_of(repeat))]


def _state(view: FamilyView, arm: str) -> str:
    """The accuracy per temperature; "synthetic-set" when the runs used the project's own set, never a real score."""
    accuracy = sorted(view.arm_metric(arm, "gsm8k_accuracy"), key=lambda r: r.temperature)
    shown = [f"{pct(r.value)} at T={r.temperature:g}" for r in accuracy if r.value is not None]
    if not shown:
        return ""
    synthetic = "synthetic-set " if SYNTHETIC_SOURCE in gsm8k_sources(view.document) else ""
    return f"{synthetic}accuracy {', '.join(shown)}"


SYNTHETIC_NOTE = ("GSM8K here is the project's **synthetic** GSM8K-format set, not the real GSM8K: its accuracy shows "
                  "whether answers stay intact between arms, not how good the model is; the real set: `specsuite run --pytest-arg=--gsm8k-path=hf` "
                  "(or `=FILE`; `pytest suites/ --gsm8k-path hf|FILE`; `hf` and .parquet need the `hf` extra: "
                  "`pip install 'specsuite[hf]'`).")


def _caveat(view: FamilyView) -> FamilyCaveat | None:
    """The synthetic set's accuracy must never read as a real score."""
    return FamilyCaveat(SYNTHETIC_NOTE, "synthetic set") if SYNTHETIC_SOURCE in gsm8k_sources(view.document) else None


def _figures(view: FamilyView) -> list[FigureSpec]:
    return [FigureSpec(kind=ESTIMATES_PER_CASE, file="gsm8k.png", title="GSM8K accuracy and invalid rate",
                       caption="Pooled over repeats; SGLang's answer definition (last integer).",
                       figure_title="GSM8K per setting and arm (95% Clopper–Pearson CI)", place=20,
                       metrics=["gsm8k_accuracy", "gsm8k_invalid"], when_run=True, first_panel_ylim=[-3, 103])]


def _request_tallies(workloads: Workloads) -> list[RequestTally]:
    """Each GSM8K run's questions (every question asked), and those that failed, by class."""
    return [RequestTally(f"GSM8K T={run.temperature:g}" if run.temperature is not None else "GSM8K", max(run.n_questions, run.n_errors),
                         run.n_errors, run.error_classes) for run in gsm8k_runs(workloads)]


FAMILY = WorkloadFamily(
    name="gsm8k", label="GSM8K", results_key="workloads.gsm8k", suite_module="test_gsm8k", records=_records,
    metrics=METRICS, verdict_rules=RULES, state=_state, report_rows=("gsm8k_accuracy", "gsm8k_invalid"),
    spread_rows=("gsm8k_accuracy",), reported_when_absent=True,
    # options, settings and nightly rules
    options=OPTIONS, settings=Gsm8kSettings, main_job=MAIN_JOB,
    nightly_gate=("gsm8k_accuracy:worse", "gsm8k_invalid:worse"),
    main_job_markers="gsm8k", main_job_part="gsm8k and bench",
    absolute_rules=(AbsoluteRule("gsm8k_floor", "GSM8K accuracy below its floor", "test_gsm8k", ("test_gsm8k_accuracy",)),),
    request_tallies=_request_tallies,
    # workload driver, pytest marker and fixtures
    driver=Gsm8kDriver, marker=("gsm8k", "GSM8K few-shot accuracy"), pytest_plugin="specsuite.pytest_plugin.gsm8k",
    # report figures and records (results side)
    figures=_figures, caveat=_caveat,
)
