"""The history's trends JSON (harness.history.analysis.analyse, written as trends.json) as typed records.

`specsuite history` hands reports/trends.py the trends as a dict; the figures and regressions.md are
drawn from these records instead.  A key a record does not name stays in its `extra`, so a record
written back (`to_dict`) is the dict it was read from, plus what the renderer adds (`Series.figures`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from harness.results.types import Record

# Keys of the trends JSON that are Python keywords, and the fields that hold them.
_KEYWORD_KEYS = {"from": "from_version", "to": "to_version"}


@dataclass
class NightRun(Record):
    """One night of a series: its position, label (build), start and outcome."""

    position: int = 0
    label: str | None = None
    started_utc: str | None = None
    outcome: str | None = None


@dataclass
class TrendPoint(Record):
    """One night's value of a metric in one case, with its 95 % interval."""

    position: int = 0
    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None


@dataclass
class Segment(Record):
    """The level of a trend between two steps."""

    start_position: int = 0
    end_position: int = 0
    mean: float = 0.0


@dataclass
class VersionChange(Record):
    """Where the metric's definition changed (its JSON keys `from` and `to`)."""

    position: int = 0
    from_version: int | None = None
    to_version: int | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VersionChange:
        return super().from_dict({_KEYWORD_KEYS.get(key, key): value for key, value in data.items()})

    def to_dict(self) -> dict[str, Any]:
        renamed = {field_name: key for key, field_name in _KEYWORD_KEYS.items()}
        return {renamed.get(key, key): value for key, value in super().to_dict().items()}


@dataclass
class StepEffect(Record):
    """A step's effect: its scale ("ratio", "relative" or a difference) and value (None from a zero level)."""

    scale: str | None = None
    value: float | None = None


@dataclass
class TrendStep(Record):
    """A detected step in a trend: where, between which levels, how large and how sure."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {"effect": ("one", StepEffect)}

    metric: str = ""
    label: str = ""
    unit: str = ""
    case_id: str = ""
    series: str | None = None  # the series key: on the analysis's own step lists
    position: int = 0
    night: int = 0
    started_utc: str | None = None
    label_at_step: str | None = None
    before_mean: float = 0.0
    after_mean: float = 0.0
    effect: StepEffect = field(default_factory=StepEffect)
    kind: str = ""
    practical: bool = False
    p_adjusted: float = 1.0
    open: bool = False


@dataclass
class Trend(Record):
    """One metric in one case of a series, night by night."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {
        "points": ("list", TrendPoint), "segments": ("list", Segment), "version_changes": ("list", VersionChange),
        "steps": ("list", TrendStep)}

    metric: str = ""
    label: str = ""
    unit: str = ""
    case_id: str = ""
    points: list[TrendPoint] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    version_changes: list[VersionChange] = field(default_factory=list)
    steps: list[TrendStep] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class Series(Record):
    """The nights of one configuration, and its trends."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {"runs": ("list", NightRun), "trends": ("list", Trend)}

    key: str = ""
    arm: str = ""
    config_key: str = ""
    model: str | None = None
    accelerator: str | None = None
    profile: str | None = None
    nights: int = 0
    first_utc: str | None = None
    last_utc: str | None = None
    runs: list[NightRun] = field(default_factory=list)
    trends: list[Trend] = field(default_factory=list)
    differs_from_first: list[str] = field(default_factory=list)
    figures: dict[str, str] = field(default_factory=dict)  # metric -> figure path, relative to the output folder


@dataclass
class Trends(Record):
    """The whole trends JSON: the series, every step, and the regressions among them."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {
        "series": ("list", Series), "steps": ("list", TrendStep), "regressions": ("list", TrendStep),
        "open_regressions": ("list", TrendStep)}

    store: str = ""
    generated_utc: str = ""
    test: str = ""
    alpha: float = 0.0
    min_size: int = 0
    series: list[Series] = field(default_factory=list)
    steps: list[TrendStep] = field(default_factory=list)
    regressions: list[TrendStep] = field(default_factory=list)
    open_regressions: list[TrendStep] = field(default_factory=list)
