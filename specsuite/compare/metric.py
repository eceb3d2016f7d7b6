"""One A/B metric's facts: the `Metric` record every workload family declares its metrics with.

A metric says what it is called (`label`, `unit`), which way is better (`direction`), the
practical threshold a "better"/"worse" verdict needs by default (`threshold`, on the effect's
`scale`), which verdict rule compares two arms (`statistic`: a rule its family registers,
specsuite.families), which family's records it reads and how (`source`, `reading`, `extract`), and
how the report shows it (`report_label`, `report_format`).  The metrics themselves are the
families' (specsuite/families/); specsuite.analysis.metric_registry lists the registered ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

Direction = Literal["higher", "lower"]
EffectScale = Literal["ratio", "relative", "difference"]
Reading = Literal["events", "per_request", "proportion", "run_value"]
ReportFormat = Literal["token_rate", "per_1200", "per_batch", "plain", "proportion", "ms", "tok_s"]

Events = tuple[int, float]  # (events, exposure)


@dataclass(frozen=True)
class Metric:
    """One A/B metric.  `extract` takes one record of its family (`source`): a typed correctness `Case`,
    a workload run (`Gsm8kRun`, `BenchRun`: specsuite.results.types) or a family's own record, and
    returns, by `reading`: (events, exposure) or None; the per-request values; (k, n) or None;
    or one value per run (None when missing)."""

    name: str
    label: str
    unit: str
    direction: Direction  # which way is better
    threshold: float  # default practical threshold, on `scale` (ratio: beyond 1 + t; relative: |change| > t; difference: > t)
    scale: EffectScale
    statistic: str  # the verdict rule that compares two arms (a `VerdictRule.statistic` of a registered family)
    source: str  # the family whose records it reads (`WorkloadFamily.name`)
    reading: Reading
    extract: Callable[[Any], Any]  # one of the family's records -> by `reading`
    report_label: str  # the row of the report's before/after table
    report_format: ReportFormat
    rate_scale: float = 1.0  # events: display value = events / exposure * rate_scale
    exposure_unit: str = ""
    bad_events: bool = False  # the candidate's value is a count of bad events: `--fail-on METRIC:any` applies
    server_counter: bool = False  # read from a server counter: absent when the server exports none
    corruption_sign: bool = False  # "worse" here is a sign of corrupt sampling (see suspect_when_better)
    suspect_when_better: bool = False  # "better" while a corruption sign is "worse" is the signature of corrupt draft probabilities
    per_token: Callable[[Any], list[float]] | None = None  # values pooled over one run, for one-run tests
    watch_both_ways: bool = False  # history: a step either way is worth a look
    version: int = 1  # bump when the definition changes: the history never joins old and new values
    short: str = ""  # the report's verdict lines ("worse on invalid ids, stray rate"); the label when empty
    plot_title: str = ""  # the report's figure panel title
    axis_label: str = ""  # the report's figure y axis; the unit when empty

    @property
    def higher_is_better(self) -> bool:
        return self.direction == "higher"

    def describe(self, test: str) -> dict[str, Any]:
        """The JSON-ready facts a renderer needs (everything but the extractors); `test` is its verdict rule in words."""
        return {"label": self.label, "unit": self.unit, "direction": self.direction, "threshold": self.threshold,
                "scale": self.scale, "statistic": self.statistic, "test": test, "source": self.source,
                "report_label": self.report_label, "report_format": self.report_format, "server_counter": self.server_counter,
                "bad_events": self.bad_events, "version": self.version, "short": self.short or self.label,
                "plot_title": self.plot_title or self.label, "axis_label": self.axis_label or self.unit}
