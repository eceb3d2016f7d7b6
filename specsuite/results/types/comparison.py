"""The A/B analysis's records (``ab_compare``, specsuite.analysis.verdicts.compare_arms): estimates, comparison rows,
the spread between repeats, the metrics' and families' facts (a family's report section and declared figures)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from specsuite.results.types.formatting import NONE_IN_EITHER
from specsuite.results.types.record import Record


@dataclass
class EstimateRow(Record):
    """One arm's pooled value of one metric at one sampling case."""

    arm: str = ""
    metric: str = ""
    label: str | None = None
    case_id: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    unit: str | None = None
    value: float | None = None
    ci: list[float | None] = field(default_factory=list)
    k: float | None = None
    n: float | None = None
    repeats: int | None = None
    note: str | None = None


@dataclass
class Effect(Record):
    """A comparison's effect: its name and scale (ratio, relative, difference), value and interval."""

    name: str | None = None
    scale: str | None = None
    value: float | None = None
    ci: list[float | None] = field(default_factory=list)
    difference: float | None = None  # rate rows: the rate difference (in the metric's unit) beside the ratio
    difference_ci: list[float | None] | None = None


@dataclass
class ArmCounts(Record):
    """A comparison's two sample sizes (``n``) or event counts (``events``), and what they count."""

    candidate: float | None = None
    baseline: float | None = None
    unit: str | None = None


@dataclass
class Equivalence(Record):
    """TOST within ``margin`` (relative): its p-value, whether equivalence was shown, and the 90 % interval."""

    margin: float | None = None
    p_value: float | None = None
    equivalent: bool | None = None
    ci: list[float | None] | None = None


@dataclass
class RankPair(Record):
    """The rank-based pair beside a run-level Welch test (not in the verdict): Mann–Whitney and the
    Hodges–Lehmann shift of log run values, its interval and TOST interval; ``test`` None with a ``note`` when untestable."""

    test: str | None = None
    note: str | None = None
    p_value: float | None = None
    estimate: float | None = None
    ci: list[float | None] | None = None
    confidence: float | None = None  # the interval's achieved confidence (rank intervals are discrete)
    tost_ci: list[float | None] | None = None
    margin: float | None = None
    equivalent: bool | None = None


@dataclass
class SpreadEntry(Record):
    """One arm's per-repeat values of one metric at one case (``repeat_spread.<metric>.<case>.<arm>``)."""

    temperature: float | None = None
    top_p: float | None = None
    unit: str | None = None
    repeats: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    min: float | None = None
    max: float | None = None
    mean: float | None = None
    sd: float | None = None  # None for one repeat


@dataclass
class Mde(Record):
    """The minimum detectable effect at the analysis's power, on its scale."""

    scale: str | None = None
    value: float | None = None
    power: float | None = None
    note: str | None = None
    repeats_needed: int | None = None
    sd_log: float | None = None  # relative MDEs: the pooled within-arm sd of log values it was scaled by


@dataclass
class ComparisonRow(Record):
    """One candidate against the baseline on one metric at one sampling case, with its verdict."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {
        "effect": ("one", Effect), "mde": ("one", Mde), "n": ("one", ArmCounts), "events": ("one", ArmCounts),
        "equivalence": ("one", Equivalence), "rank": ("one", RankPair)}

    metric: str = ""
    label: str | None = None
    case_id: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    candidate: str = ""
    baseline: str = ""
    unit: str | None = None
    candidate_value: float | None = None
    baseline_value: float | None = None
    effect: Effect | None = None
    p_value: float | None = None
    p_adjusted: float | None = None
    mde: Mde | None = None
    test: str | None = None
    n: ArmCounts | None = None
    higher_is_better: bool | None = None
    note: str | None = None
    threshold: float | None = None
    events: ArmCounts | None = None
    verdict: str | None = None
    verdict_by_rule: bool | None = None  # the metric's verdict rule decided it without a test: no Holm-adjusted p
    suspect_because: dict[str, list[str]] = field(default_factory=dict)  # "suspect" rows: metric -> cases the arm is worse in
    value_statistic: str | None = None  # when the values are not the per-case tables' statistic (accept length: means)
    equivalence: Equivalence | None = None  # TOST within the threshold (run-level and per-token ITL rows)
    rank: RankPair | None = None  # run-level rows: the rank-based pair beside Welch
    candidate_runs: list[float] = field(default_factory=list)  # compare_run_values: the run values it compared
    baseline_runs: list[float] = field(default_factory=list)

    def shown_verdict(self) -> str:
        """The verdict as a report shows it: an event rate with no event in either arm is not
        "inconclusive" but "none in either arm" (nothing to compare, nothing wrong)."""
        events = self.events
        if self.verdict == "inconclusive" and events is not None and events.to_dict() and not events.candidate and not events.baseline:
            return NONE_IN_EITHER
        return str(self.verdict)


@dataclass
class MetricFacts(Record):
    """What the metric registry says of a metric, as the analysis carries it (``metrics.<name>``)."""

    label: str | None = None
    unit: str | None = None
    source: str | None = None  # its workload family (cases, gsm8k, bench, lossless, integrity, ...)
    short: str | None = None  # its name in a verdict line
    report_label: str | None = None
    report_format: str | None = None  # token_rate, proportion, per_1200, ms, tok_s, ...
    plot_title: str | None = None
    axis_label: str | None = None
    server_counter: bool | None = None

    def fact(self, key: str, metric: str) -> str:
        """A display fact; a fact an older analysis lacks reads as the label or unit, else the metric's name."""
        fallback = {"report_format": "plain", "short": self.label, "plot_title": self.label, "axis_label": self.unit}.get(key)
        return getattr(self, key, None) or self.extra.get(key) or fallback or metric.replace("_", " ")


@dataclass
class ReportTable(Record):
    """A table of a family's report section: its heading (none when empty), header and rows, as text."""

    title: str = ""
    header: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)


@dataclass
class ReportSection(Record):
    """A family's own report section (its `WorkloadFamily.section`): a title, paragraphs, then tables."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {"tables": ("list", ReportTable)}

    title: str = ""
    paragraphs: list[str] = field(default_factory=list)
    tables: list[ReportTable] = field(default_factory=list)


# The kinds of figure a family declares (`FigureSpec.kind`), each drawn by one generic renderer (specsuite/reports/plots.py).
ESTIMATES_PER_CASE = "estimates per case"  # a panel per metric: each arm's pooled value per sampling case, 95 % interval
ESTIMATES_AGAINST_TEMPERATURE = "estimates against temperature"  # one metric: a line per arm and top_p against T
ECDF = "ecdf"  # a panel per `EcdfPanel`: each arm's values' empirical CDF and median


@dataclass
class EcdfPanel(Record):
    """One panel of an ECDF figure: its title and each arm's values."""

    title: str = ""
    series: dict[str, list[float]] = field(default_factory=dict)  # arm -> values, in the arms' run order


@dataclass
class FigureSpec(Record):
    """A figure a workload family declares for the report (its `WorkloadFamily.figures`), carried by the analysis and
    drawn by the renderer of its `kind` from the analysis alone: the estimates of `metrics`, or the ECDF `panels`."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {"panels": ("list", EcdfPanel)}

    kind: str = ""  # ESTIMATES_PER_CASE, ESTIMATES_AGAINST_TEMPERATURE or ECDF
    file: str = ""  # the PNG's name in the report folder
    title: str = ""  # its heading in the report
    caption: str = ""
    figure_title: str = ""  # the title drawn on the figure
    place: int = 0  # its place among the report's figures (lower first)
    metrics: list[str] = field(default_factory=list)  # the estimates it draws (those the analysis holds)
    when_run: bool = False  # drawn only when its family ran; silently left out otherwise
    absent_note: str | None = None  # the report's note when it has nothing to draw (None: left out silently)
    event_rates: bool = False  # its metrics are event rates: every figure of them starts its axis at zero
    first_panel_ylim: list[float] | None = None
    x_label: str | None = None
    y_label: str | None = None
    unit: str | None = None  # ECDF: the values' unit, in each series' legend
    panels: list[EcdfPanel] = field(default_factory=list)


@dataclass
class FamilyFacts(Record):
    """What the family registry says of a workload family, as the analysis carries it (``families.<name>``)."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {"section": ("one", ReportSection), "figures": ("list", FigureSpec)}

    label: str | None = None  # its name in the verdict lines
    results_key: str | None = None  # where a repeat holds its data
    suite_module: str | None = None  # its suite's test module (why it errored)
    reported_when_absent: bool | None = None  # the "not run" line names it when it has no data
    effect_in_line: bool | None = None  # a verdict line names the effect of a metric with one hit
    where_in_line: bool | None = None  # a verdict line names the cases its verdicts hold in
    state: dict[str, str] = field(default_factory=dict)  # arm -> its own figures
    section: ReportSection | None = None
    figures: list[FigureSpec] = field(default_factory=list)  # the report's figures it declares
    caveat: str | None = None  # a note under the verdict lines when it ran (the synthetic GSM8K set)
    caveat_tag: str | None = None  # the same, short, after its metrics' labels in the before/after tables


@dataclass
class Comparison(Record):
    """The A/B analysis of a document (specsuite.analysis.verdicts.compare_arms)."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {
        "comparisons": ("list", ComparisonRow), "estimates": ("list", EstimateRow), "metrics": ("map", MetricFacts),
        "repeat_spread": ("map.map.map", SpreadEntry), "families": ("map", FamilyFacts)}

    family_alpha: float | None = None
    correction: str | None = None
    confidence: float | None = None
    power: float | None = None
    baseline: str | None = None
    candidates: list[str] = field(default_factory=list)
    arm_order: list[str] = field(default_factory=list)
    thresholds: dict[str, Any] = field(default_factory=dict)
    workloads: dict[str, str] = field(default_factory=dict)  # workload family -> "run" | why not
    notes: list[str] = field(default_factory=list)
    comparisons: list[ComparisonRow] = field(default_factory=list)
    estimates: list[EstimateRow] = field(default_factory=list)
    repeat_spread: dict[str, dict[str, dict[str, SpreadEntry]]] = field(default_factory=dict)  # metric -> case -> arm
    metrics: dict[str, MetricFacts] = field(default_factory=dict)  # metric -> registry facts (label, unit, format)
    report_rows: list[str] = field(default_factory=list)
    spread_rows: list[Any] = field(default_factory=list)
    families: dict[str, FamilyFacts] = field(default_factory=dict)  # family -> registry facts, in registration order

    def facts(self, metric: str) -> MetricFacts:
        return self.metrics.get(metric) or MetricFacts()

    def ran(self, workload: str) -> bool:
        return self.workloads.get(workload) == "run"
