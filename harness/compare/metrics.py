"""What each A/B metric is and how it is read from a merged results dict, per arm, case and repeat.

The metrics (names used by `compare_arms`, `--fail-on` and the reports): event rates from the
correctness detectors and the server's counters (`RATE_METRICS`), the per-request accept length,
GSM8K accuracy and invalid rate, and the bench's median ITL and output throughput.  This module
gathers each arm's data (`gather_arm`), gives one value per repeat (`run_values`, for the spread
between repeats and run-level tests) and the pooled per-arm estimates with 95 % intervals
(`estimates`) that the report's before/after tables show.  Workload results live under
`repeats[].workloads.gsm8k` / `.bench`, as one result dict or a list of them (one per setting);
a run's setting is its `config.temperature` / `config.top_p` (bench_serving's 0 and 1 when absent).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats as scipy_stats

from harness.errors import SpecsuiteError
from harness.server import refserver_contract
from harness.stats import clopper_pearson
from harness.workloads.correctness.workload import SamplingCase

CONFIDENCE = 0.95
GSM8K_DEFINITION = "sglang"
NONFINITE_ENTRIES = refserver_contract.NONFINITE_ENTRIES
SAMPLER_BATCHES = refserver_contract.SAMPLER_BATCHES
FALLBACK_EMISSIONS = refserver_contract.FALLBACK_EMISSIONS
GENERATED_TOKENS = "sglang:generation_tokens_total"

Events = tuple[int, float]  # (events, exposure)


def _detector_events(*names: str) -> Callable[[dict[str, Any]], Events | None]:
    """Events of the first detector present in a case, out of its denominator."""
    def extract(case: dict[str, Any]) -> Events | None:
        detectors = case.get("detectors") or {}
        for name in names:
            entry = detectors.get(name)
            if isinstance(entry, dict) and entry.get("total"):
                return int(entry.get("count") or 0), float(entry["total"])
        return None
    return extract


def _counter_events(events_key: str, exposure_key: str | None) -> Callable[[dict[str, Any]], Events | None]:
    """A server counter delta out of another counter (or, with None, out of generated tokens)."""
    def extract(case: dict[str, Any]) -> Events | None:
        counters = case.get("server_counters") or {}
        if events_key not in counters:
            return None
        exposure = counters.get(exposure_key) if exposure_key else counters.get(GENERATED_TOKENS, case.get("n_tokens"))
        if not exposure or exposure <= 0:
            return None
        return int(round(counters[events_key])), float(exposure)
    return extract


@dataclass(frozen=True)
class RateMetric:
    """An event rate: display value = events / exposure * scale."""

    name: str
    label: str
    unit: str
    exposure_unit: str
    scale: float
    extract: Callable[[dict[str, Any]], Events | None]


RATE_METRICS = (
    RateMetric("invalid_ids", "invalid ids", "per generated token", "tokens", 1.0, _detector_events("invalid_id")),
    RateMetric("fallback_ids", "sampler fallback ids (vocab_size-1)", "per generated token", "tokens", 1.0,
               _detector_events("fallback_id")),
    RateMetric("padded_row_ids", "padded-row ids", "per generated token", "tokens", 1.0, _detector_events("padded_row_id")),
    RateMetric("stray_per_1200", "stray tokens per 1200 generated", "per 1200 generated tokens", "tokens", 1200.0,
               _detector_events("stray_char")),
    RateMetric("fragment_excess", "excess structural fragments", "per generated token", "tokens", 1.0,
               _detector_events("fragment_id", "fragment_text")),
    RateMetric("nonfinite_draft_probs", "non-finite draft_probs entries", "per sampler batch", "sampler batches", 1.0,
               _counter_events(NONFINITE_ENTRIES, SAMPLER_BATCHES)),
    RateMetric("sampler_fallbacks", "sampler fallback emissions", "per committed token", "committed tokens", 1.0,
               _counter_events(FALLBACK_EMISSIONS, None)),
)
RATES = {metric.name: metric for metric in RATE_METRICS}

# The scale of each metric's effect: what `--fail-on` thresholds are measured against.
EFFECT_SCALES = {
    **{name: "ratio" for name in RATES},
    "accept_length": "relative",
    "gsm8k_accuracy": "difference",
    "gsm8k_invalid": "difference",
    "itl_median": "relative",
    "output_throughput": "relative",
}
METRICS = tuple(EFFECT_SCALES)
COUNT_METRICS = (*RATES, "gsm8k_invalid")  # metrics whose candidate value is a count of bad events
HIGHER_IS_BETTER = frozenset({"accept_length", "gsm8k_accuracy", "output_throughput"})

LABELS = {
    **{metric.name: metric.label for metric in RATE_METRICS},
    "accept_length": "accept length",
    "gsm8k_accuracy": "GSM8K accuracy",
    "gsm8k_invalid": "GSM8K invalid rate",
    "itl_median": "median ITL",
    "output_throughput": "output throughput",
}
UNITS = {
    **{metric.name: metric.unit for metric in RATE_METRICS},
    "accept_length": "tokens per verify step",
    "gsm8k_accuracy": "fraction correct",
    "gsm8k_invalid": "fraction invalid",
    "itl_median": "ms",
    "output_throughput": "tok/s",
}


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
    """One sampling case (or workload setting) of one arm: the per-repeat dicts."""

    temperature: float
    top_p: float
    runs: list[tuple[int, dict[str, Any]]] = field(default_factory=list)


ArmData = dict[str, dict[str, CaseRuns]]  # family ("cases", "gsm8k", "bench") -> case_id -> runs


def _workload_runs(repeat: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """A repeat's runs of one workload: a single result dict or a list of them (one per setting)."""
    value = (repeat.get("workloads") or {}).get(name)
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, dict)]
    return []


def _setting(run: dict[str, Any]) -> tuple[float, float]:
    """Temperature and top_p of a workload run; bench_serving's defaults (0, 1) when unrecorded."""
    config = run.get("config") or {}
    return float(config.get("temperature", run.get("temperature", 0.0))), float(config.get("top_p", run.get("top_p", 1.0)))


def gather_arm(arm: dict[str, Any]) -> ArmData:
    data: ArmData = {"cases": {}, "gsm8k": {}, "bench": {}}
    for index, repeat in enumerate(arm.get("repeats") or [], start=1):
        if not isinstance(repeat, dict):
            continue
        number = int(repeat.get("repeat", index))
        for case in repeat.get("cases") or []:
            if isinstance(case, dict) and "case_id" in case:
                entry = data["cases"].setdefault(case["case_id"], CaseRuns(float(case.get("temperature") or 0.0),
                                                                          float(case.get("top_p") or 1.0)))
                entry.runs.append((number, case))
        for family in ("gsm8k", "bench"):
            for run in _workload_runs(repeat, family):
                temperature, top_p = _setting(run)
                entry = data[family].setdefault(_case_id(temperature, top_p), CaseRuns(temperature, top_p))
                entry.runs.append((number, run))
    return data


def arm_roles(results: dict[str, Any]) -> tuple[list[str], str | None, list[str]]:
    """(arms present in run order, the baseline if present, notes)."""
    arms = results.get("arms")
    if not isinstance(arms, dict):
        raise SpecsuiteError("results have no 'arms' object; is this a specsuite results.json?")
    order = [name for name in (results.get("arm_order") or list(arms)) if name in arms]
    order += [name for name in arms if name not in order]
    baseline = results.get("baseline_arm") or (results.get("arm_order") or order or [None])[-1]
    notes = []
    if baseline not in arms:
        notes.append(f"baseline arm {baseline!r} has no results; no comparisons")
        baseline = None
    elif len(order) < 2:
        notes.append("only one arm; no comparisons")
    return order, baseline, notes


# ---------------------------------------------------------------- per-metric series


def rate_series(runs: CaseRuns, metric: RateMetric) -> list[tuple[int, int, float]]:
    series = []
    for number, case in runs.runs:
        events = metric.extract(case)
        if events is not None:
            series.append((number, *events))
    return series


def accept_series(runs: CaseRuns) -> list[tuple[int, list[float]]]:
    series = []
    for number, case in runs.runs:
        values = [float(v) for v in ((case.get("acceptance") or {}).get("per_request") or []) if v is not None]
        if values:
            series.append((number, values))
    return series


def gsm8k_counts(run: dict[str, Any], key: str) -> tuple[int, int] | None:
    entry = ((run.get("definitions") or {}).get(GSM8K_DEFINITION) or {}).get(key) or {}
    if not entry.get("n"):
        return None
    return int(entry.get("k") or 0), int(entry["n"])


def itl_ms(run: dict[str, Any]) -> list[float]:
    """Per-token ITLs in ms (bench_serving `itls`: per-request lists in seconds); zero gaps dropped."""
    return [float(x) * 1000.0 for request in (run.get("itls") or []) for x in (request or []) if x and x > 0]


def _itl_run_value(run: dict[str, Any]) -> float | None:
    if run.get("median_itl_ms") is not None:
        return float(run["median_itl_ms"])
    itls = itl_ms(run)
    return float(np.median(itls)) if itls else None


def run_values(runs: CaseRuns, metric: str) -> list[tuple[int, float]]:
    """One value per repeat in the metric's display unit (for spread tables and run-level tests)."""
    values: list[tuple[int, float | None]] = []
    if metric in RATES:
        values = [(n, k / e * RATES[metric].scale) for n, k, e in rate_series(runs, RATES[metric])]
    elif metric == "accept_length":
        values = [(n, float(np.median(v))) for n, v in accept_series(runs)]
    elif metric in ("gsm8k_accuracy", "gsm8k_invalid"):
        key = "accuracy" if metric == "gsm8k_accuracy" else "invalid"
        values = [(n, c[0] / c[1]) for n, run in runs.runs if (c := gsm8k_counts(run, key))]
    elif metric == "itl_median":
        values = [(n, _itl_run_value(run)) for n, run in runs.runs]
    elif metric == "output_throughput":
        values = [(n, run.get("output_throughput")) for n, run in runs.runs]
    return [(n, float(v)) for n, v in values if v is not None and math.isfinite(float(v)) and float(v) >= 0]


def metric_family(metric: str) -> str:
    """Where a metric's data lives in an ArmData: "cases", "gsm8k" or "bench"."""
    return "gsm8k" if metric.startswith("gsm8k") else "bench" if metric in ("itl_median", "output_throughput") else "cases"


# ---------------------------------------------------------------- estimates


def _estimate(metric: str, runs: CaseRuns) -> dict[str, Any] | None:
    """Pooled value of one arm and case with its 95 % interval, or None without data."""
    row: dict[str, Any] = {"value": None, "ci": None, "k": None, "n": None, "repeats": 0, "note": None}
    if metric in RATES:
        series = rate_series(runs, RATES[metric])
        if not series:
            return None
        k, e, scale = sum(s[1] for s in series), sum(s[2] for s in series), RATES[metric].scale
        row.update(value=k / e * scale, k=k, n=num(e), repeats=len(series))
        if k <= e and float(e).is_integer():
            row["ci"] = interval(clopper_pearson(k, int(e), CONFIDENCE), scale)
        else:
            row["note"] = "more events than exposure units: no binomial interval"
    elif metric == "accept_length":
        series = accept_series(runs)
        if not series:
            return None
        values = np.concatenate([v for _, v in series])
        row.update(value=float(values.mean()), n=int(values.size), repeats=len(series), note="mean of per-request values")
        if values.size >= 2:
            row["ci"] = interval(_mean_interval(values))
    elif metric in ("gsm8k_accuracy", "gsm8k_invalid"):
        key = "accuracy" if metric == "gsm8k_accuracy" else "invalid"
        counts = [c for _, run in runs.runs if (c := gsm8k_counts(run, key))]
        if not counts:
            return None
        k, n = sum(c[0] for c in counts), sum(c[1] for c in counts)
        row.update(value=k / n, k=k, n=n, repeats=len(counts), ci=interval(clopper_pearson(k, n, CONFIDENCE)))
    else:
        values = run_values(runs, metric)
        if not values:
            return None
        row.update(value=float(np.mean([v for _, v in values])), n=len(values), repeats=len(values))
        itls = [x for _, run in runs.runs for x in itl_ms(run)] if metric == "itl_median" else []
        if itls:
            ci = scipy_stats.quantile_test(itls, q=float(np.median(itls)), p=0.5).confidence_interval(CONFIDENCE)
            row.update(value=float(np.median(itls)), ci=interval((ci.low, ci.high)), n=len(itls),
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


def estimates(order: list[str], gathered: dict[str, ArmData]) -> list[dict[str, Any]]:
    """One row per (arm, metric, case) with data: pooled value, 95 % interval, k, n, repeats."""
    rows = []
    for arm in order:
        for metric in METRICS:
            for case_id, runs in sorted_cases(gathered[arm][metric_family(metric)]):
                estimate = _estimate(metric, runs)
                if estimate is not None:
                    rows.append({"arm": arm, "metric": metric, "label": LABELS[metric], "case_id": case_id,
                                 "temperature": runs.temperature, "top_p": runs.top_p, "unit": UNITS[metric], **estimate})
    return rows


def repeat_spread(order: list[str], gathered: dict[str, ArmData]) -> dict[str, Any]:
    """{metric: {case_id: {arm: {repeats, values, min, max, mean, sd}}}}; sd is None for one repeat."""
    spread: dict[str, Any] = {}
    for metric in METRICS:
        for arm in order:
            for case_id, runs in sorted_cases(gathered[arm][metric_family(metric)]):
                values = run_values(runs, metric)
                if not values:
                    continue
                numbers = np.array([v for _, v in values])
                spread.setdefault(metric, {}).setdefault(case_id, {})[arm] = {
                    "temperature": runs.temperature, "top_p": runs.top_p, "unit": UNITS[metric],
                    "repeats": [n for n, _ in values], "values": numbers.tolist(),
                    "min": float(numbers.min()), "max": float(numbers.max()), "mean": float(numbers.mean()),
                    "sd": float(np.std(numbers, ddof=1)) if numbers.size >= 2 else None,
                }
    return spread
