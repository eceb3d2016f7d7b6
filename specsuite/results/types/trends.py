"""The history's trends (trends.json, specsuite.history.analysis): every series, its trends, points and steps."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from specsuite.results.types.record import Record


@dataclass
class StepEffect(Record):
    """A step's effect on its metric's scale; ``value`` None with ``from_zero`` when the level before was zero."""

    scale: str | None = None
    value: float | None = None
    from_zero: bool = False


@dataclass
class TrendStep(Record):
    """One step of a trend (specsuite.history.analysis): where, how large, how sure, and whether the series still sits there."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {"effect": ("one", StepEffect)}

    metric: str = ""
    label: str | None = None
    unit: str | None = None
    direction: str | None = None
    case_id: str | None = None
    metric_version: int | None = None
    position: int = 0
    night: int = 0
    run_id: int | None = None
    started_utc: str | None = None
    build_hash: str | None = None
    label_at_step: str | None = None
    previous_run_id: int | None = None
    previous_label: str | None = None
    before_mean: float | None = None
    after_mean: float | None = None
    before_nights: int | None = None
    after_nights: int | None = None
    effect: StepEffect | None = None
    threshold: float | None = None
    practical: bool = False
    kind: str = ""  # regression | improvement | change
    shape: str | None = None
    statistic: float | None = None
    p_value: float | None = None
    p_adjusted: float | None = None
    candidates_searched: int | None = None
    alpha: float | None = None
    test: str | None = None
    open: bool = False  # the latest step of its trend: the series still sits at the new level
    series: str | None = None  # in the analysis's step lists: the series it belongs to


@dataclass
class TrendPoint(Record):
    """One night of a trend."""

    position: int = 0
    run_id: int | None = None
    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    k: float | None = None
    n: float | None = None
    version: int | None = None


@dataclass
class TrendSegment(Record):
    """A stretch of nights at one level."""

    start_position: int = 0
    end_position: int = 0
    mean: float | None = None


# Keys of a version change that are Python keywords, and the fields that hold them.
_VERSION_CHANGE_KEYS = {"from": "from_version", "to": "to_version"}


@dataclass
class VersionChange(Record):
    """Where a trend's metric definition (version) changed; written with the keys ``position``, ``from`` and ``to``."""

    position: int = 0
    from_version: int | None = None
    to_version: int | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VersionChange:
        return super().from_dict({_VERSION_CHANGE_KEYS.get(key, key): value for key, value in data.items()})

    def to_dict(self) -> dict[str, Any]:
        written_as = {field_name: key for key, field_name in _VERSION_CHANGE_KEYS.items()}
        return {written_as.get(key, key): value for key, value in super().to_dict().items()}


@dataclass
class Trend(Record):
    """One metric at one sampling case over a series' nights: its points, levels, version changes and steps."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {
        "points": ("list", TrendPoint), "segments": ("list", TrendSegment), "version_changes": ("list", VersionChange),
        "steps": ("list", TrendStep)}

    metric: str = ""
    label: str | None = None
    unit: str | None = None
    direction: str | None = None
    case_id: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    points: list[TrendPoint] = field(default_factory=list)
    segments: list[TrendSegment] = field(default_factory=list)
    version_changes: list[VersionChange] = field(default_factory=list)
    steps: list[TrendStep] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class SeriesRun(Record):
    """One stored run of a series, as the trends list it."""

    id: int | None = None
    position: int = 0
    started_utc: str | None = None
    label: str | None = None
    build_hash: str | None = None
    server_version: str | None = None
    outcome: str | None = None
    results_run_id: str | None = None
    node: str | None = None


@dataclass
class TrendSeries(Record):
    """Every stored run of one configuration and arm, oldest first, and its trends."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {"runs": ("list", SeriesRun), "trends": ("list", Trend)}

    key: str = ""
    arm: str | None = None
    config_key: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    model: str | None = None
    accelerator: str | None = None
    profile: str | None = None
    nights: int = 0
    first_utc: str | None = None
    last_utc: str | None = None
    runs: list[SeriesRun] = field(default_factory=list)
    trends: list[Trend] = field(default_factory=list)
    differs_from_first: list[str] = field(default_factory=list)  # every series but the first: how its configuration differs
    figures: dict[str, str] = field(default_factory=dict)  # metric -> figure path under the output folder (specsuite/reports/trends.py)


@dataclass
class Trends(Record):
    """The history's analysis (specsuite.history.analysis.analyse): every series, every step, the regressions."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {
        "series": ("list", TrendSeries), "steps": ("list", TrendStep), "regressions": ("list", TrendStep),
        "open_regressions": ("list", TrendStep)}

    generated_utc: str | None = None
    store: str | None = None
    filters: dict[str, Any] = field(default_factory=dict)
    alpha: float | None = None
    min_size: int | None = None
    test: str | None = None
    series: list[TrendSeries] = field(default_factory=list)
    steps: list[TrendStep] = field(default_factory=list)
    regressions: list[TrendStep] = field(default_factory=list)
    open_regressions: list[TrendStep] = field(default_factory=list)
