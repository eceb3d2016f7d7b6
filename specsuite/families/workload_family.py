"""What a workload family is: where its records live, its A/B metrics and verdict rules, its report part, its history.

A `WorkloadFamily` is everything the A/B analysis (specsuite.compare), the report (specsuite/reports/, through the
analysis) and the history (specsuite.history) need to know of one kind of results, written once:

- `records`: the A/B metrics extractor: a repeat's records of the family, each with its case (a
  sampling setting, or a case no setting names, such as a session's integrity checks);
- `metrics`: its A/B metrics (specsuite.compare.metric.Metric), each citing one of its `verdict_rules`;
- `state` and `section`: its report part: an arm's own figures for its verdict line, and a section of
  its own (title, paragraphs, tables), both written into the analysis, which the report renders;
- `history`: the metrics the nightly history stores and trends (every metric when None);
- `driver`, `marker`, `pytest_plugin`: how its workload runs on a server (the RunSession builds every registered
  family's driver), the pytest marker of its suite and the plugin module of its fixtures (the pytest plugin loads them).
- `figures` and `caveat`: the report's figures it declares (`FigureSpec`: what to draw and its data, drawn by the
  generic renderers of specsuite/reports/plots.py) and a note its results need, both written into the analysis.
  Its typed records come from its own `records.py`, which reads the raw part a repeat's `Workloads` keeps.

The generic code iterates the registry (specsuite.families.registry) and names no family.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from specsuite.compare.engines import Engine
from specsuite.compare.metric import Metric
from specsuite.compare.series import CaseRuns
from specsuite.config.option import Option
from specsuite.families.correctness.workload import SamplingCase
from specsuite.results.types import (
    ComparisonRow,
    Document,
    EstimateRow,
    FamilyFacts,
    FigureSpec,
    Repeat,
    ReportSection,
    ReportTable,
    Workloads,
)


@dataclass(frozen=True)
class AbsoluteRule:
    """A rule of `--profile nightly`'s absolute gate (specsuite.analysis.absolute) that a family declares: a candidate
    arm breaks it when one of the family's tests failed (`test_functions` of `test_module`; empty: any of its tests),
    or when `recorded` counts an event in one of the arm's repeats (the integrity violations), test or no test."""

    name: str
    meaning: str
    test_module: str
    test_functions: tuple[str, ...] = ()
    recorded: Callable[[Workloads], int] | None = None


@dataclass(frozen=True)
class RequestTally:
    """Requests a family sent in one repeat, for the run's failure lines (specsuite.orchestration.failures): where
    (`label`), how many, how many failed, and the failures by class (the harness's timeouts or the server's errors)."""

    label: str
    requests: int
    errors: int
    error_classes: dict[str, int] | None = None


@dataclass(frozen=True)
class FamilyFailure:
    """A failure line of a family's own (the serving benchmark's failed requests): its kind, count and reason."""

    kind: str
    count: int
    reason: str


@dataclass(frozen=True)
class VerdictRule:
    """How two arms' values of a metric are compared: the name metrics cite (`Metric.statistic`), the test in
    words (the analysis's metric facts), and the engine that fills a comparison row (specsuite.compare.engines)."""

    statistic: str
    test: str
    compare: Engine


@dataclass(frozen=True)
class FamilyRecord:
    """One of a family's records in one repeat, and the case it belongs to."""

    case_id: str
    temperature: float | None  # None for a case no sampling setting names
    top_p: float | None
    record: Any


def setting_record(temperature: float, top_p: float, record: Any) -> FamilyRecord:
    """A record of one sampling setting, under the case id the correctness cases use for it (`t=1-top_p=0.9`)."""
    return FamilyRecord(SamplingCase(temperature, top_p).case_id, temperature, top_p, record)


def workloads_of(repeat: Repeat) -> Workloads:
    """A repeat's workloads (empty when the file holds them in another shape)."""
    return repeat.workloads if isinstance(repeat.workloads, Workloads) else Workloads()


@dataclass
class FamilyView:
    """What a family's report part reads: the document, the arms, and the family's own records, estimates and comparisons."""

    document: Document
    arm_order: list[str]
    baseline: str | None
    cases: dict[str, dict[str, CaseRuns]]  # arm -> case_id -> the family's records per repeat
    estimates: list[EstimateRow] = field(default_factory=list)
    comparisons: list[ComparisonRow] = field(default_factory=list)

    @property
    def candidates(self) -> list[str]:
        return [arm for arm in self.arm_order if self.baseline is not None and arm != self.baseline]

    def arm_estimates(self, arm: str) -> dict[str, list[EstimateRow]]:
        """One arm's estimates by metric."""
        by_metric: dict[str, list[EstimateRow]] = {}
        for row in self.estimates:
            if row.arm == arm:
                by_metric.setdefault(row.metric, []).append(row)
        return by_metric

    def arm_metric(self, arm: str, metric: str) -> list[EstimateRow]:
        """One arm's estimates of one metric, in the view's order; [] when it has none."""
        return [row for row in self.estimates if row.arm == arm and row.metric == metric]

    def table_header(self, *leading: str) -> list[str]:
        """A section table's header: the leading columns, each arm with its role, then a verdict column per candidate."""
        return [*leading, *(f"{arm} ({'baseline' if arm == self.baseline else 'candidate'})" for arm in self.arm_order),
                *(f"verdict {candidate} vs {self.baseline}" for candidate in self.candidates)]

    def verdict_cells(self, metrics: Iterable[str], case_id: str) -> list[str]:
        """Each candidate's verdict (as the report shows it) on one of `metrics` at one case; "–" where it has none."""
        names = set(metrics)
        found = {row.candidate: row.shown_verdict() for row in self.comparisons if row.metric in names and row.case_id == case_id}
        return [f"**{found[candidate]}**" if candidate in found else "–" for candidate in self.candidates]


@dataclass(frozen=True)
class FamilyCaveat:
    """A note a family's results need, as the report prints it: under the verdict lines, and short after its metrics' labels."""

    note: str
    tag: str


def one_table_section(title: str, paragraph: str, header: list[str], rows: list[list[str]]) -> ReportSection:
    """A family's report section of one paragraph and one table."""
    return ReportSection.written(title=title, paragraphs=[paragraph], tables=[ReportTable.written(title="", header=header, rows=rows)])


@dataclass(frozen=True)
class WorkloadFamily:
    """One workload family, registered once (specsuite.families.registry.register)."""

    name: str  # each of its metrics' `source`
    label: str  # its name in the verdict lines and the "not run" line
    results_key: str  # where a repeat holds its data: "cases" or "workloads.<key>"
    suite_module: str  # its suite's test module: a failed test there, with no data, says why it did not run
    records: Callable[[Repeat], Iterable[FamilyRecord]]
    metrics: tuple[Metric, ...]
    verdict_rules: tuple[VerdictRule, ...]
    state: Callable[[FamilyView, str], str]  # an arm's own figures ("" for none)
    section: Callable[[FamilyView], ReportSection | None] | None = None
    history: tuple[str, ...] | None = None  # the metrics the history keeps; None: every metric
    report_rows: tuple[str, ...] = ()  # its rows of the report's before/after table per sampling case
    spread_rows: tuple[str, ...] = ()  # its rows of the report's spread-between-repeats table
    reported_when_absent: bool = False  # described in every analysis, and named in the "not run" line when absent
    effect_in_line: bool = True  # a verdict line names the effect of a metric with one hit
    where_in_line: bool = True  # a verdict line names the cases its verdicts hold in
    checks_losslessness: bool = False  # its comparisons judge whether a higher accept length is a speed-up (the A/B guard)
    # options, settings and nightly rules
    options: tuple[Option, ...] = ()  # its options (specsuite/families/<name>/options.py), in the option table after the generic ones
    settings: type | None = None  # its settings section, a frozen dataclass whose fields read `options` (RunConfig.<settings_key>)
    settings_key: str | None = None  # the section's name in RunConfig; None: the family's name
    main_job: tuple[tuple[str, Any], ...] = ()  # option values `specsuite run`'s main job sets (flag, value as pytest parses it)
    nightly_gate: tuple[str, ...] = ()  # `--fail-on` terms `--profile nightly` adds, besides every corruption sign's `worse`
    absolute_rules: tuple[AbsoluteRule, ...] = ()  # its rules of `--profile nightly`'s absolute gate
    request_tallies: Callable[[Workloads], list[RequestTally]] | None = None  # its requests in one repeat, for the failure lines
    failures: Callable[[list[Workloads]], list[FamilyFailure]] | None = None  # its own failure lines over an arm's repeats
    main_job_markers: str | None = None  # its tests in `specsuite run`'s main job (a pytest marker expression); None: not run
    main_job_part: str = ""  # the part of a reference arm's main-job run it shares a session with (families of one part join)

    @property
    def settings_name(self) -> str:
        """Where RunConfig holds its settings section (`run_config.gsm8k`)."""
        return self.settings_key or self.name
    # workload driver, pytest marker and fixtures
    driver: Callable[[Any], Any] | None = None  # builds its workload driver over a RunSession (specsuite/families/workload_driver.py)
    marker: tuple[str, str] | None = None  # its suite's pytest marker: name, description
    pytest_plugin: str | None = None  # the module of its pytest fixtures and parametrization (specsuite/pytest_plugin/)
    # report figures and records (results side)
    figures: Callable[[FamilyView], list[FigureSpec]] | None = None  # the report's figures it declares, with their data
    caveat: Callable[[FamilyView], FamilyCaveat | None] | None = None  # a note its results need (the synthetic GSM8K set)

    @property
    def is_workload(self) -> bool:
        """Its data is one of a repeat's workloads (the analysis says whether it ran)."""
        return self.results_key.startswith("workloads.")

    @property
    def history_metrics(self) -> tuple[str, ...]:
        return self.history if self.history is not None else tuple(metric.name for metric in self.metrics)

    def facts(self, view: FamilyView) -> FamilyFacts:
        """The family as the analysis carries it to the report: how its lines read, each arm's figures, its section."""
        facts = FamilyFacts.written(label=self.label, results_key=self.results_key, suite_module=self.suite_module,
                                    reported_when_absent=self.reported_when_absent, effect_in_line=self.effect_in_line,
                                    where_in_line=self.where_in_line,
                                    state={arm: self.state(view, arm) for arm in view.arm_order})
        section = self.section(view) if self.section is not None else None
        if section is not None:
            facts.put("section", section)
        figures = self.figures(view) if self.figures is not None else []
        if figures:
            facts.put("figures", figures)
        caveat = self.caveat(view) if self.caveat is not None else None
        if caveat is not None:
            facts.update(caveat=caveat.note, caveat_tag=caveat.tag)
        return facts
