"""One arm's records of one sampling case (or setting), and each metric's values read from them.

`CaseRuns` holds a family's records of one case, each with its repeat number (specsuite.analysis.metrics
gathers them); the readers here turn them into what a metric's `reading` says: events and exposure per
repeat, per-request values, (k, n) per repeat, per-token values, or one value per repeat.  The
verdict rules (specsuite/families/) and the per-arm estimates read the same series.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specsuite.compare.metric import Metric

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


@dataclass
class CaseRuns:
    """One sampling case (or workload setting) of one arm: its family's record per repeat (`Case`, `Gsm8kRun`,
    `BenchRun` or a family's own record).  A case that no sampling setting names (a whole session's checks)
    has None for both."""

    temperature: float | None
    top_p: float | None
    runs: list[tuple[int, Any]] = field(default_factory=list)


def setting_order(temperature: float | None, top_p: float | None) -> tuple[bool, float, bool, float]:
    """The sort key of a case: by temperature, then top_p; cases without a setting last."""
    return temperature is None, temperature or 0.0, top_p is None, top_p or 0.0


def sorted_cases(cases: dict[str, CaseRuns]) -> list[tuple[str, CaseRuns]]:
    """Cases in (temperature, top_p) order."""
    return sorted(cases.items(), key=lambda item: setting_order(item[1].temperature, item[1].top_p))


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
    """(repeat, k, n) of a proportion metric (GSM8K accuracy and invalid rate, a lossless test's pass flag)."""
    return [(number, *counts) for number, run in runs.runs if (counts := metric.extract(run))]


def per_token_values(runs: CaseRuns, metric: Metric) -> list[float]:
    """The per-token values of every run pooled (median ITL's gaps); empty for other metrics."""
    return [x for _, run in runs.runs for x in metric.per_token(run)] if metric.per_token else []


def run_values(runs: CaseRuns, metric: Metric) -> list[tuple[int, float]]:
    """One value per repeat in the metric's display unit (for spread tables and run-level tests)."""
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
