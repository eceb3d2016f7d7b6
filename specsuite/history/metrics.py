"""The metrics the history keeps for each run and sampling case, and what "worse" means for each.

The metrics, their readings, units, thresholds and versions are the workload families'
(specsuite/families/; the ones `--fail-on` and the A/B reports use), and each family names the ones the
history keeps (`WorkloadFamily.history_metrics`): event rates from the detectors and server counters
(`invalid_ids`, `fallback_ids`, `stray_per_1200`, ...), the per-request accept length (mean per
case), GSM8K accuracy and invalid rate when that workload ran, the bench's median ITL and output
throughput when it ran, each lossless test's pass rate per setting, and the integrity violations
per checked answer, in all and per check.

A metric's registry `version` is bumped when its definition changes (a detector rule, a
denominator, a unit), and the history will never draw or test old and new values as one trend.
Each stored metric keeps its raw samples (events and exposure per repeat, per-request accept
lengths, per-repeat values) so a trend point can be re-derived; per-token ITLs stay in the run's
stored document and the metric points at them (`samples_ref`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from specsuite.analysis.metrics import estimates, gather_arm
from specsuite.compare.metric import Metric
from specsuite.compare.series import CaseRuns, per_request_series, proportion_series, rate_series, run_values
from specsuite.families.registry import families, metric, registered_metrics
from specsuite.results.types import Arm

Direction = Literal["lower", "higher", "either"]

# Mutable on purpose: a test bumps one version to check that the trend splits.
METRIC_VERSIONS: dict[str, int] = {entry.name: entry.version for entry in registered_metrics()}


def direction_of(entry: Metric) -> Direction:
    """Which way is worse: the registry's direction, or "either" where a step either way is worth a look (accept
    length: a drop slows serving, a rise at T > 0 is the signature of corrupt draft probabilities).  A step must also be practically
    large to count: the metric's A/B threshold on its effect scale (specsuite.history.analysis)."""
    return "either" if entry.watch_both_ways else entry.direction


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


def _samples(entry: Metric, runs: CaseRuns) -> list[dict[str, Any]]:
    """The raw data behind one metric's value, one entry per repeat."""
    if entry.reading == "events":
        return [{"repeat": n, "events": k, "exposure": e} for n, k, e in rate_series(runs, entry)]
    if entry.reading == "per_request":
        return [{"repeat": n, "values": values} for n, values in per_request_series(runs, entry)]
    if entry.reading == "proportion":
        return [{"repeat": n, "k": k, "n": total} for n, k, total in proportion_series(runs, entry)]
    return [{"repeat": n, "value": value} for n, value in run_values(runs, entry)]


def extract_metrics(arm: Arm, document_ref: str) -> list[MetricRecord]:
    """Every metric with data in one arm (its repeats), per case or setting.

    `document_ref` names where the arm's full document is kept; metrics whose raw samples are
    too many to copy (per-token ITLs) point there instead.
    """
    gathered = {_SINGLE_ARM: gather_arm(arm)}
    kept = {name for family in families() for name in family.history_metrics}
    records = []
    for row in estimates([_SINGLE_ARM], gathered):
        if row.metric not in kept:
            continue
        entry, case_id = metric(row.metric), str(row.case_id)
        runs = gathered[_SINGLE_ARM][entry.source][case_id]
        ci = row.ci or (None, None)
        records.append(MetricRecord(
            name=entry.name, case_id=case_id, temperature=float(row.temperature or 0.0), top_p=float(row.top_p or 0.0),
            value=row.value, ci_low=ci[0], ci_high=ci[1],
            k=None if row.k is None else float(row.k), n=None if row.n is None else float(row.n),
            repeats=int(row.repeats or 0), samples=_samples(entry, runs),
            samples_ref=f"{document_ref}#workloads.bench.itls" if entry.per_token else None,
            note=row.note, version=METRIC_VERSIONS.get(entry.name, entry.version), unit=entry.unit,
            direction=direction_of(entry),
        ))
    return records
