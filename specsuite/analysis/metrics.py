"""Each A/B metric read from a merged results document, per arm, family, case and repeat.

The metrics themselves (names, labels, units, directions, how each is extracted) are the workload
families' (specsuite/families/).  This module gathers each arm's records of every registered family
(`gather_arm`) and gives the pooled per-arm estimates with 95 % intervals (`estimates`) that the
report's before/after tables show, and one value per repeat (`repeat_spread`).  Each family finds its
own records in a repeat (`WorkloadFamily.records`): the correctness cases under `repeats[].cases`, the
workloads under `repeats[].workloads` (GSM8K and the bench at their `config.temperature` /
`config.top_p`, bench_serving's 0 and 1 when absent).  `bench_results_document` wraps benchmark
session summaries in that shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from specsuite.compare.metric import Metric
from specsuite.compare.series import (
    CONFIDENCE,
    CaseRuns,
    interval,
    num,
    per_request_series,
    per_token_values,
    proportion_series,
    rate_series,
    run_values,
    sorted_cases,
)
from specsuite.errors import SpecsuiteError
from specsuite.families.registry import families, registered_metrics
from specsuite.results.builder import bench_repeats, comparison_of
from specsuite.results.types import Arm, Document, EstimateRow, SpreadEntry
from specsuite.stats import clopper_pearson
from specsuite.stats.lazy_scipy import stats as scipy_stats

ArmData = dict[str, dict[str, CaseRuns]]  # family -> case_id -> runs


def gather_arm(arm: Arm) -> ArmData:
    """An arm's records by family and case, each with its repeat number."""
    registered = families()
    data: ArmData = {family.name: {} for family in registered}
    for index, repeat in enumerate(arm.repeats or [], start=1):
        number = int(repeat.repeat if repeat.has("repeat") else index)
        for family in registered:
            for found in family.records(repeat):
                entry = data[family.name].setdefault(found.case_id, CaseRuns(found.temperature, found.top_p))
                entry.runs.append((number, found.record))
    return data


def arm_roles(document: Document) -> tuple[list[str], str | None, list[str]]:
    """(arms present in run order, the baseline if present, notes)."""
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


# ---------------------------------------------------------------- estimates


def _estimate(metric: Metric, runs: CaseRuns) -> dict[str, Any] | None:
    """Pooled value of one arm and case with its 95 % interval, or None without data."""
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
        values = run_values(runs, metric)
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


_ESTIMATE_KEYS = ("arm", "metric", "label", "case_id", "temperature", "top_p", "unit", "value", "ci", "k", "n", "repeats", "note")


def estimates(order: list[str], gathered: dict[str, ArmData]) -> list[EstimateRow]:
    """One row per (arm, metric, case) with data: pooled value, 95 % interval, k, n, repeats."""
    rows = []
    for arm in order:
        for metric in registered_metrics():
            for case_id, runs in sorted_cases(gathered[arm].get(metric.source) or {}):
                estimate = _estimate(metric, runs)
                if estimate is not None:
                    rows.append(EstimateRow(arm=arm, metric=metric.name, label=metric.label, case_id=case_id,
                                            temperature=runs.temperature, top_p=runs.top_p, unit=metric.unit,
                                            **estimate, key_order=_ESTIMATE_KEYS))
    return rows


def repeat_spread(order: list[str], gathered: dict[str, ArmData]) -> dict[str, dict[str, dict[str, SpreadEntry]]]:
    """{metric: {case_id: {arm: SpreadEntry (repeats, values, min, max, mean, sd)}}}; sd is None for one repeat."""
    spread: dict[str, dict[str, dict[str, SpreadEntry]]] = {}
    for metric in registered_metrics():
        for arm in order:
            for case_id, runs in sorted_cases(gathered[arm].get(metric.source) or {}):
                values = run_values(runs, metric)
                if not values:
                    continue
                numbers = np.array([v for _, v in values])
                spread.setdefault(metric.name, {}).setdefault(case_id, {})[arm] = SpreadEntry.written(
                    temperature=runs.temperature, top_p=runs.top_p, unit=metric.unit,
                    repeats=[n for n, _ in values], values=numbers.tolist(),
                    min=float(numbers.min()), max=float(numbers.max()), mean=float(numbers.mean()),
                    sd=float(np.std(numbers, ddof=1)) if numbers.size >= 2 else None)
    return spread


def bench_results_document(arms: dict[str, Sequence[dict[str, Any]]], baseline: str) -> Document:
    """Benchmark session summaries per arm as a merged results document (`arms.<name>.repeats[].workloads.bench`)."""
    return comparison_of({name: bench_repeats(runs) for name, runs in arms.items()}, baseline)
