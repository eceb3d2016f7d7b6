"""The registered A/B metrics as one table: what the analysis writes for the report, and the lookups that read it.

The metrics are the workload families' (specsuite/families/, one package per family); this module lists
what the registry holds.  The A/B verdicts (specsuite.analysis.verdicts), the per-arm estimates
(specsuite.analysis.metrics) and the history store (specsuite.history.metrics) read the live registry;
and so does `--fail-on` (specsuite.analysis.fail_on).  The report,
which imports nothing from the harness, reads the same facts from the analysis, where `compare_arms`
writes `metric_table()` for the families it describes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from specsuite.compare.metric import Metric
from specsuite.families.registry import families, registered_metrics, verdict_rule
from specsuite.families.registry import metric as metric  # the registered metric of a name (KeyError names the known ones)
from specsuite.families.workload_family import WorkloadFamily
from specsuite.results.types import MetricFacts

REGISTRY: tuple[Metric, ...] = registered_metrics()  # as registered at import: the built-in families' metrics
BY_NAME: dict[str, Metric] = {entry.name: entry for entry in REGISTRY}
METRICS: tuple[str, ...] = tuple(BY_NAME)  # the order of comparison rows

SUSPECT_NOTE = ("higher accept length in an arm that is worse on {signs}: the signature of corrupt draft probabilities (acceptance climbs "
                "when the sampler falls back to a padded-vocabulary id), not a speed-up")


def default_thresholds() -> dict[str, float]:
    """Every registered metric's default practical threshold."""
    return {entry.name: entry.threshold for entry in registered_metrics()}


@dataclass(frozen=True)
class MetricTable:
    """The described metrics' facts by name, then the layout: the families' before/after and spread rows, in their order."""

    metrics: dict[str, MetricFacts]
    report_rows: list[str]
    spread_rows: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"metrics": {name: facts.to_dict() for name, facts in self.metrics.items()},
                "report_rows": list(self.report_rows), "spread_rows": list(self.spread_rows)}


def metric_table(described: Iterable[WorkloadFamily] | None = None) -> MetricTable:
    """The metrics of the `described` families (every registered one when None), for the analysis (and so the report)."""
    chosen = families() if described is None else tuple(described)
    return MetricTable(
        metrics={entry.name: MetricFacts.from_dict(entry.describe(verdict_rule(entry.statistic).test))
                 for known in chosen for entry in known.metrics},
        report_rows=[name for known in chosen for name in known.report_rows],
        spread_rows=[name for known in chosen for name in known.spread_rows])
