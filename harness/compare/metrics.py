"""Each A/B metric read from a merged results dict, per arm, case and repeat.

The metrics themselves (names, labels, units, directions, how each is extracted) are
harness.compare.metric_registry's.  This module gathers each arm's data (`gather_arm`), gives one
value per repeat (`run_values`, for the spread between repeats and run-level tests) and the pooled
per-arm estimates with 95 % intervals (`estimates`) that the report's before/after tables show.
Workload results live under `repeats[].workloads.gsm8k` / `.bench`, as one result dict or a list
of them (one per setting); a run's setting is its `config.temperature` / `config.top_p`
(bench_serving's 0 and 1 when absent).  `bench_results_document` wraps benchmark session
summaries in that shape.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats as scipy_stats

from harness.compare.metric_registry import BY_NAME, METRICS, Metric
from harness.errors import SpecsuiteError
from harness.results.builder import bench_repeats, comparison_of
from harness.results.types import Arm, BenchRun, Document, EstimateRow, Gsm8kRun, Repeat, SpreadEntry, Workloads
from harness.stats import clopper_pearson
from harness.workloads.correctness.workload import SamplingCase

CONFIDENCE = 0.95


def num(value: Any) -> float | None:
    """JSON-safe float: None for missing, nan or infinite values."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def interval(ci: Sequence[float] | None, scale: float = 1.0) -> list[float | None] | None:
    """A (low, high) pair scaled into the display unit, JSON-safe (an open end becomes None)."""
    return None if ci is None else [num(ci[0] * scale), num(ci[1] * scale)]


def _case_id(temperature: float, top_p: float) -> str:
    return SamplingCase(temperature, top_p).case_id


# ---------------------------------------------------------------- gathering the data


@dataclass
class CaseRuns:
    """One sampling case (or workload setting) of one arm: its typed record per repeat
    (`Case`, `Gsm8kRun` or `BenchRun`, harness.results.types)."""

    temperature: float
    top_p: float
    runs: list[tuple[int, Any]] = field(default_factory=list)


ArmData = dict[str, dict[str, CaseRuns]]  # family ("cases", "gsm8k", "bench") -> case_id -> runs


def _workload_runs(repeat: Repeat, name: str) -> list[Gsm8kRun] | list[BenchRun]:
    """A repeat's runs of one workload: one run or a list of them (one per setting)."""
    workloads = repeat.workloads if isinstance(repeat.workloads, Workloads) else Workloads()
    return workloads.gsm8k_runs() if name == "gsm8k" else workloads.bench_runs()


def gather_arm(arm: Arm | dict[str, Any]) -> ArmData:
    """An arm's records by family and case, each with its repeat number."""
    typed = arm if isinstance(arm, Arm) else Arm.from_dict(arm)
    data: ArmData = {"cases": {}, "gsm8k": {}, "bench": {}}
    for index, repeat in enumerate(typed.repeats or [], start=1):
        number = int(repeat.repeat if repeat.has("repeat") else index)
        for case in repeat.cases or []:
            if case.has("case_id"):
                entry = data["cases"].setdefault(case.case_id, CaseRuns(float(case.temperature or 0.0), float(case.top_p or 1.0)))
                entry.runs.append((number, case))
        for family in ("gsm8k", "bench"):
            for run in _workload_runs(repeat, family):
                temperature, top_p = run.setting()
                entry = data[family].setdefault(_case_id(temperature, top_p), CaseRuns(temperature, top_p))
                entry.runs.append((number, run))
    return data


def arm_roles(results: Document | dict[str, Any]) -> tuple[list[str], str | None, list[str]]:
    """(arms present in run order, the baseline if present, notes)."""
    document = Document.of(results)
    if not document.has("arms"):
        raise SpecsuiteError("results have no 'arms' object; is this a specsuite results.json?")
    arms = document.arms
    order = [name for name in (document.arm_order or list(arms)) if name in arms]
    order += [name for name in arms if name not in order]
    baseline = document.baseline_arm or (document.arm_order or order or [None])[-1]
    notes = []
    if baseline not in arms:
        notes.append(f"baseline arm {baseline!r} has no results; no comparisons")
        baseline = None
    elif len(order) < 2:
        notes.append("only one arm; no comparisons")
    return order, baseline, notes


# ---------------------------------------------------------------- per-metric series


def rate_series(runs: CaseRuns, metric: Metric) -> list[tuple[int, int, float]]:
    """(repeat, events, exposure) of an event-rate metric, for each repeat that has it."""
    series = []
    for number, case in runs.runs:
        events = metric.extract(case)
        if events is not None:
            series.append((number, *events))
    return series


def per_request_series(runs: CaseRuns, metric: Metric) -> list[tuple[int, list[float]]]:
    """(repeat, per-request values) of a per-request metric (accept length)."""
    return [(number, values) for number, case in runs.runs if (values := metric.extract(case))]


def proportion_series(runs: CaseRuns, metric: Metric) -> list[tuple[int, int, int]]:
    """(repeat, k, n) of a proportion metric (GSM8K accuracy and invalid rate)."""
    return [(number, *counts) for number, run in runs.runs if (counts := metric.extract(run))]


def per_token_values(runs: CaseRuns, metric: Metric) -> list[float]:
    """The per-token values of every run pooled (median ITL's gaps); empty for other metrics."""
    return [x for _, run in runs.runs for x in metric.per_token(run)] if metric.per_token else []


def run_values(runs: CaseRuns, name: str) -> list[tuple[int, float]]:
    """One value per repeat in the metric's display unit (for spread tables and run-level tests)."""
    metric = BY_NAME[name]
    values: list[tuple[int, float | None]]
    if metric.reading == "events":
        values = [(n, k / e * metric.rate_scale) for n, k, e in rate_series(runs, metric)]
    elif metric.reading == "per_request":
        values = [(n, float(np.median(v))) for n, v in per_request_series(runs, metric)]
    elif metric.reading == "proportion":
        values = [(n, k / total) for n, k, total in proportion_series(runs, metric)]
    else:
        values = [(n, metric.extract(run)) for n, run in runs.runs]
    return [(n, float(v)) for n, v in values if v is not None and math.isfinite(float(v)) and float(v) >= 0]


# ---------------------------------------------------------------- estimates


def _estimate(name: str, runs: CaseRuns) -> dict[str, Any] | None:
    """Pooled value of one arm and case with its 95 % interval, or None without data."""
    metric = BY_NAME[name]
    row: dict[str, Any] = {"value": None, "ci": None, "k": None, "n": None, "repeats": 0, "note": None}
    if metric.reading == "events":
        series = rate_series(runs, metric)
        if not series:
            return None
        k, e, scale = sum(s[1] for s in series), sum(s[2] for s in series), metric.rate_scale
        row.update(value=k / e * scale, k=k, n=num(e), repeats=len(series))
        if k <= e and float(e).is_integer():
            row["ci"] = interval(clopper_pearson(k, int(e), CONFIDENCE), scale)
        else:
            row["note"] = "more events than exposure units: no binomial interval"
    elif metric.reading == "per_request":
        requests = per_request_series(runs, metric)
        if not requests:
            return None
        values = np.concatenate([v for _, v in requests])
        row.update(value=float(values.mean()), n=int(values.size), repeats=len(requests), note="mean of per-request values")
        if values.size >= 2:
            row["ci"] = interval(_mean_interval(values))
    elif metric.reading == "proportion":
        counts = proportion_series(runs, metric)
        if not counts:
            return None
        k, n = sum(c[1] for c in counts), sum(c[2] for c in counts)
        row.update(value=k / n, k=k, n=n, repeats=len(counts), ci=interval(clopper_pearson(k, n, CONFIDENCE)))
    else:
        values = run_values(runs, name)
        if not values:
            return None
        row.update(value=float(np.mean([v for _, v in values])), n=len(values), repeats=len(values))
        tokens = per_token_values(runs, metric)
        if tokens:
            ci = scipy_stats.quantile_test(tokens, q=float(np.median(tokens)), p=0.5).confidence_interval(CONFIDENCE)
            row.update(value=float(np.median(tokens)), ci=interval((ci.low, ci.high)), n=len(tokens),
                       note="median of pooled per-token ITLs")
        elif len(values) >= 2:
            row.update(ci=interval(_mean_interval(np.array([v for _, v in values]))), note="mean of run-level values")
    return row


def _mean_interval(values: np.ndarray) -> tuple[float, float]:
    if np.ptp(values) == 0:
        return float(values[0]), float(values[0])
    ci = scipy_stats.ttest_1samp(values, 0.0).confidence_interval(CONFIDENCE)
    return float(ci.low), float(ci.high)


# ---------------------------------------------------------------- per-arm tables


def sorted_cases(cases: dict[str, CaseRuns]) -> list[tuple[str, CaseRuns]]:
    """Cases in (temperature, top_p) order."""
    return sorted(cases.items(), key=lambda item: (item[1].temperature, item[1].top_p))


_ESTIMATE_KEYS = ("arm", "metric", "label", "case_id", "temperature", "top_p", "unit", "value", "ci", "k", "n", "repeats", "note")


def estimates(order: list[str], gathered: dict[str, ArmData]) -> list[EstimateRow]:
    """One row per (arm, metric, case) with data: pooled value, 95 % interval, k, n, repeats."""
    rows = []
    for arm in order:
        for metric in METRICS:
            for case_id, runs in sorted_cases(gathered[arm][BY_NAME[metric].source]):
                estimate = _estimate(metric, runs)
                if estimate is not None:
                    rows.append(EstimateRow(arm=arm, metric=metric, label=BY_NAME[metric].label, case_id=case_id,
                                            temperature=runs.temperature, top_p=runs.top_p, unit=BY_NAME[metric].unit,
                                            **estimate, key_order=_ESTIMATE_KEYS))
    return rows


def repeat_spread(order: list[str], gathered: dict[str, ArmData]) -> dict[str, dict[str, dict[str, SpreadEntry]]]:
    """{metric: {case_id: {arm: SpreadEntry (repeats, values, min, max, mean, sd)}}}; sd is None for one repeat."""
    spread: dict[str, dict[str, dict[str, SpreadEntry]]] = {}
    for metric in METRICS:
        for arm in order:
            for case_id, runs in sorted_cases(gathered[arm][BY_NAME[metric].source]):
                values = run_values(runs, metric)
                if not values:
                    continue
                numbers = np.array([v for _, v in values])
                spread.setdefault(metric, {}).setdefault(case_id, {})[arm] = SpreadEntry.written(
                    temperature=runs.temperature, top_p=runs.top_p, unit=BY_NAME[metric].unit,
                    repeats=[n for n, _ in values], values=numbers.tolist(),
                    min=float(numbers.min()), max=float(numbers.max()), mean=float(numbers.mean()),
                    sd=float(np.std(numbers, ddof=1)) if numbers.size >= 2 else None)
    return spread


def bench_results_document(arms: dict[str, Sequence[dict[str, Any]]], baseline: str) -> dict[str, Any]:
    """Benchmark session summaries per arm in the merged results shape (`arms.<name>.repeats[].workloads.bench`)."""
    return comparison_of({name: bench_repeats(runs) for name, runs in arms.items()}, baseline).to_dict()
