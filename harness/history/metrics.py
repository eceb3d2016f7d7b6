"""The metrics the history keeps for each run and sampling case, and what "worse" means for each.

The names and readings are harness.compare.metrics' (the ones `--fail-on` and the A/B reports use):
event rates from the detectors and server counters (`invalid_ids`, `fallback_ids`,
`stray_per_1200`, ...), the per-request accept length (mean per case), GSM8K accuracy and
invalid rate when that workload ran, and the bench's median ITL and output throughput when it ran.

Every metric carries a version (`METRIC_VERSIONS`): bump it when the metric's definition changes
(a detector rule, a denominator, a unit), and the history will never draw or test old and new
values as one trend.  Each stored metric keeps its raw samples (events and exposure per repeat,
per-request accept lengths, per-repeat values) so a trend point can be re-derived; per-token ITLs
stay in the run's stored document and the metric points at them (`samples_ref`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from harness.compare.metrics import (
    EFFECT_SCALES,
    LABELS,
    METRICS,
    RATES,
    UNITS,
    CaseRuns,
    accept_series,
    estimates,
    gather_arm,
    gsm8k_counts,
    metric_family,
    rate_series,
    run_values,
)
from harness.compare.verdicts import DEFAULT_THRESHOLDS

Direction = Literal["lower", "higher", "either"]

METRIC_VERSIONS: dict[str, int] = {name: 1 for name in METRICS}

# Which way is worse. accept_length goes both ways: a drop slows serving, and a rise at T > 0 is
# the founding bug's signature (a broken accept test accepts more), so any step is worth a look.
DIRECTIONS: dict[str, Direction] = {
    **{name: "lower" for name in RATES},
    "accept_length": "either",
    "gsm8k_accuracy": "higher",
    "gsm8k_invalid": "lower",
    "itl_median": "lower",
    "output_throughput": "higher",
}

# A step must also be practically large to count: the A/B thresholds, on the metric's effect scale
# ("ratio": rate ratio beyond 1 + t, any rise from zero; "relative": |change| > t; "difference": > t).
THRESHOLDS: dict[str, float] = dict(DEFAULT_THRESHOLDS)
SCALES: dict[str, str] = dict(EFFECT_SCALES)
METRIC_LABELS: dict[str, str] = dict(LABELS)
METRIC_UNITS: dict[str, str] = dict(UNITS)

_SINGLE_ARM = "arm"


@dataclass(frozen=True)
class MetricRecord:
    """One metric of one run and case: the value with its 95 % interval and the raw samples."""

    name: str
    case_id: str
    temperature: float
    top_p: float
    value: float | None
    ci_low: float | None
    ci_high: float | None
    k: float | None  # events (rates) or successes (proportions); None for continuous metrics
    n: float | None  # exposure, trials or sample size
    repeats: int
    samples: list[dict[str, Any]] = field(default_factory=list)
    samples_ref: str | None = None
    note: str | None = None
    version: int = 1
    unit: str = ""
    direction: Direction = "lower"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _samples(metric: str, runs: CaseRuns) -> list[dict[str, Any]]:
    """The raw data behind one metric's value, one entry per repeat."""
    if metric in RATES:
        return [{"repeat": n, "events": k, "exposure": e} for n, k, e in rate_series(runs, RATES[metric])]
    if metric == "accept_length":
        return [{"repeat": n, "values": values} for n, values in accept_series(runs)]
    if metric in ("gsm8k_accuracy", "gsm8k_invalid"):
        key = "accuracy" if metric == "gsm8k_accuracy" else "invalid"
        return [{"repeat": n, "k": c[0], "n": c[1]} for n, run in runs.runs if (c := gsm8k_counts(run, key))]
    return [{"repeat": n, "value": value} for n, value in run_values(runs, metric)]


def extract_metrics(arm: dict[str, Any], document_ref: str) -> list[MetricRecord]:
    """Every metric with data in one arm (the `{"repeats": [...]}` shape), per case or setting.

    `document_ref` names where the arm's full document is kept; metrics whose raw samples are
    too many to copy (per-token ITLs) point there instead.
    """
    gathered = {_SINGLE_ARM: gather_arm(arm)}
    records = []
    for row in estimates([_SINGLE_ARM], gathered):
        metric, case_id = row["metric"], row["case_id"]
        runs = gathered[_SINGLE_ARM][metric_family(metric)][case_id]
        ci = row["ci"] or (None, None)
        records.append(MetricRecord(
            name=metric, case_id=case_id, temperature=float(row["temperature"]), top_p=float(row["top_p"]),
            value=row["value"], ci_low=ci[0], ci_high=ci[1],
            k=None if row["k"] is None else float(row["k"]), n=None if row["n"] is None else float(row["n"]),
            repeats=int(row["repeats"]), samples=_samples(metric, runs),
            samples_ref=f"{document_ref}#workloads.bench.itls" if metric == "itl_median" else None,
            note=row["note"], version=METRIC_VERSIONS[metric], unit=METRIC_UNITS[metric], direction=DIRECTIONS[metric],
        ))
    return records
