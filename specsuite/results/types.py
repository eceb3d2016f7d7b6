"""The typed results model: a ``results.json`` as dataclasses, from the document down to one case.

Why dataclasses and not pydantic: the model has to load every file written since schema version 1
and write it back unchanged, including keys no class here names yet (writers add sections over
time). Plain dataclasses with an explicit ``from_dict``/``to_dict`` do that in a page of code, need
no new dependency, and import nothing of the rest of the project, so ``specsuite/reports/`` (which reads
results only) can read these types as well as ``specsuite/`` writes them.

How a record keeps what it does not know: ``from_dict`` fills the named fields and keeps every other
key in ``extra``, and remembers the key order it read; ``to_dict`` writes the keys back in that
order, then the named fields set since (those left at their empty default are not written), then
new ``extra`` keys. So ``Document.from_dict(d).to_dict() == d`` for any document, typed or not, and
a value of an unexpected shape (a list where a record was expected) is kept as it was, not lost.

The levels (the writers are named in specsuite.results.builder):

- `Document`: the header, ``arms`` (name -> `Arm`), the kernel suite's `KernelSection`, the A/B
  `Comparison` (``ab_compare``), the ``fail_on`` outcome and, from ``specsuite run``, what failed (`RunFailure`);
- `Arm`: one server (build) and its `Repeat` list; a `Repeat` is one session: its `Case` list,
  its `Workloads` (each workload family's raw data under its key: the family's records.py reads it typed,
  e.g. specsuite.families.gsm8k.records) and, from ``specsuite run``, its `JunitOutcome` (`FailedTest` per failed test);
- `Comparison`: `EstimateRow` per arm, metric and case; `ComparisonRow` per candidate, metric and case (its
  `Effect`, `Mde`, `ArmCounts`, `Equivalence` and `RankPair`); `SpreadEntry` per metric, case and arm;
  `FamilyFacts` per workload family (its verdict-line figures per arm and its `ReportSection`);
- typed views of sections the model keeps as dicts, for the readers that need a few of their fields:
  `ArmVocab`, `ArmIdentity`, `FailOnVerdict`;
- the history's trends.json (specsuite.history.analysis): `Trends`, its `TrendSeries`, `Trend` and `TrendStep`.

The number formats (`fmt`, `pct`, `fmt_p`) live here too: the report and the text the harness writes into
the analysis for it format numbers alike.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

SCHEMA_VERSION = 3
ANALYSIS_KEY = "ab_compare"  # the A/B analysis (specsuite.analysis.verdicts.compare_arms)
FAIL_ON_KEY = "fail_on"  # the --fail-on outcome (specsuite.analysis.fail_on)

# The reference server's counters the run summary shows, named once here for every reader
# (specsuite.server.refserver_contract exports them; tests/compare/test_metric_registry.py holds them equal).
NONFINITE_COUNTER = "specsuite_refserver:draft_probs_nonfinite_entries_total"
FALLBACK_COUNTER = "specsuite_refserver:sampler_fallback_emissions_total"

NONE_IN_EITHER = "none in either arm"  # how an "inconclusive" rate reads when neither arm had a single event


# ---------------------------------------------------------------- number formats


# Shared by the report (specsuite/reports/blocks.py re-exports them) and the text the harness writes into the analysis
# for it (a family's verdict-line figures and report section), so both read alike.
def fmt(value: float | None, digits: int = 3) -> str:
    """A number to `digits` significant figures; '∞' for a missing bound."""
    if value is None:
        return "∞"
    if value == 0:
        return "0"
    if abs(value) >= 10 ** digits:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def pct(value: float | None, digits: int = 3) -> str:
    return "∞" if value is None else f"{fmt(value * 100, digits)}%"


def fmt_p(p: float | None) -> str:
    if p is None:
        return "–"
    return "<1e-300" if p == 0 else f"{p:.2g}"


def case_title(temperature: float, top_p: float) -> str:
    """A sampling case as the report names it (its headings, a figure's panels)."""
    return f"T = {temperature:g}, top_p = {top_p:g}"


R = TypeVar("R", bound="Record")
_HIDDEN = ("extra", "key_order")


@dataclass
class Record:
    """A JSON object with named fields; keys it does not name stay in ``extra``."""

    # field name -> (kind, record class): values loaded as records, not dicts.  kind: "one", "list" or "map"
    # (name -> record); maps of maps are "map.map", "map.map.map" (the A/B spread: metric -> case -> arm -> entry).
    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {}

    extra: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, kw_only=True)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False, kw_only=True)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls) if f.name not in _HIDDEN)

    @classmethod
    def from_dict(cls: type[R], data: dict[str, Any]) -> R:
        names = set(cls.field_names())
        values: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in data.items():
            if key not in names:
                extra[key] = value
                continue
            loaded = _load(cls.NESTED.get(key), value)
            if loaded is _WRONG_SHAPE:
                extra[key] = value  # kept as written; the typed field stays empty
            else:
                values[key] = loaded
        return cls(**values, extra=extra, key_order=tuple(data))

    @classmethod
    def written(cls: type[R], **values: Any) -> R:
        """A record of these field values, each written (default or not) in the order given, as a dict literal
        of them would be: the way a writer builds a record whose file has always carried every key."""
        return cls(**values, key_order=tuple(values))

    def put(self, key: str, value: Any) -> None:
        """Set a key as ``dict[key] = value`` would: a new key goes last, a known one keeps its place (writers that
        build a record step by step keep the key order their files always had); keys the type does not name go to
        ``extra``; a dict given for a nested record field is loaded as that record."""
        if key in self.field_names():
            loaded = _load(self.NESTED.get(key), value)
            setattr(self, key, value if loaded is _WRONG_SHAPE else loaded)
        else:
            self.extra[key] = value
        if key not in self.key_order:
            self.key_order = (*self.key_order, key)

    def update(self, **values: Any) -> None:
        """`put` for each keyword, in order (``dict.update``)."""
        for key, value in values.items():
            self.put(key, value)

    def has(self, name: str) -> bool:
        """Whether the named field holds a value of its own: read from the dict (in the shape its
        type expects), or set away from its default since."""
        if name in self.extra:
            return False
        if name in self.key_order:
            return True
        spec = next(f for f in dataclasses.fields(self) if f.name == name)
        return getattr(self, name) != _default_of(spec)

    def to_dict(self) -> dict[str, Any]:
        named = self.field_names()
        defaults = {f.name: _default_of(f) for f in dataclasses.fields(self) if f.name in named}
        out: dict[str, Any] = {}
        for key in self.key_order:
            if key in named and key not in self.extra:
                out[key] = _dump(getattr(self, key))
            elif key in self.extra:
                out[key] = self.extra[key]
        for name in named:
            value = getattr(self, name)
            if name not in out and name not in self.extra and value != defaults[name]:
                out[name] = _dump(value)
        out.update((key, value) for key, value in self.extra.items() if key not in out)
        return out


class _WrongShape:
    pass


_WRONG_SHAPE = _WrongShape()


def _load(nested: tuple[str, type[Record]] | None, value: Any) -> Any:
    if nested is None or value is None:
        return value
    kind, record = nested
    return _load_kind(kind, record, value)


def _load_kind(kind: str, record: type[Record], value: Any) -> Any:
    """``value`` loaded as ``kind`` of ``record``; _WRONG_SHAPE when any part of it is not of that shape."""
    if kind == "one":
        return _load_one(record, value)
    if kind == "list":
        loaded = [_load_one(record, item) for item in value] if isinstance(value, list) else [_WRONG_SHAPE]
        return _WRONG_SHAPE if any(item is _WRONG_SHAPE for item in loaded) else loaded
    inner = kind.partition(".")[2] or "one"  # "map": name -> record; "map.map": name -> (name -> record); ...
    if not isinstance(value, dict):
        return _WRONG_SHAPE
    mapped = {key: _load_kind(inner, record, item) for key, item in value.items()}
    return _WRONG_SHAPE if any(item is _WRONG_SHAPE for item in mapped.values()) else mapped


def _load_one(record: type[Record], value: Any) -> Any:
    """A dict as the record (a record of that class, as it is); anything else is of the wrong shape."""
    if isinstance(value, record):
        return value
    return record.from_dict(value) if isinstance(value, dict) else _WRONG_SHAPE


def _dump(value: Any) -> Any:
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, list):
        return [_dump(item) for item in value]
    if isinstance(value, dict):
        return {key: _dump(item) for key, item in value.items()}
    return value


def _default_of(spec: dataclasses.Field) -> Any:
    if spec.default is not dataclasses.MISSING:
        return spec.default
    if spec.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return spec.default_factory()  # type: ignore[misc]
    return _WRONG_SHAPE  # a required field is always written


# ---------------------------------------------------------------- one sampling case


@dataclass
class Acceptance(Record):
    """A case's accept lengths: per request, their mean, and the server's own figure after a flush."""

    per_request: list[float] = field(default_factory=list)
    mean: float | None = None
    accept_rates: list[Any] = field(default_factory=list)
    server_after_flush: float | None = None


@dataclass
class Case(Record):
    """One sampling case of one session (specsuite.families.correctness.workload.CaseResult.to_dict)."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {"acceptance": ("one", Acceptance)}

    case_id: str = ""
    temperature: float | None = None
    top_p: float | None = None
    profile: str | None = None
    seed: int | None = None
    n_requests: int = 0
    n_errors: int = 0
    errors: list[str] = field(default_factory=list)
    error_classes: dict[str, int] = field(default_factory=dict)
    n_skipped: int = 0
    stopped: str | None = None
    after_case_error: str | None = None
    warnings: list[str] = field(default_factory=list)
    n_tokens: int = 0
    wall_time_s: float = 0.0
    detectors: dict[str, dict[str, Any]] = field(default_factory=dict)  # detector -> {count, ...}
    server_counters: dict[str, float] = field(default_factory=dict)
    acceptance: Acceptance = field(default_factory=Acceptance)

    def detector(self, name: str, key: str = "count") -> float:
        """A detector's total (0 when it did not run or found nothing)."""
        found = (self.detectors or {}).get(name)
        return float((found.get(key) if isinstance(found, dict) else None) or 0)

    def counter(self, name: str) -> float | None:
        """A server counter's value after the case, or None when the server does not export it."""
        return self.server_counters.get(name)

    def detector_events(self, name: str) -> tuple[int, float] | None:
        """(events, denominator) of a detector that ran over a non-empty denominator, else None."""
        total = self.detector(name, "total")
        return (int(self.detector(name)), total) if total else None

    def accept_lengths(self) -> list[float]:
        """The per-request accept lengths recorded (None entries left out)."""
        values = (self.acceptance.per_request if isinstance(self.acceptance, Acceptance) else None) or []
        return [float(v) for v in values if v is not None]


# ---------------------------------------------------------------- workloads


def sampling_setting(config: dict[str, Any] | None, own: dict[str, Any], name: str, default: float) -> float:
    """A workload run's sampling setting `name`: its config's, else its own key's, else `default`."""
    for stated in (config or {}, own):
        if name in stated:
            return float(stated[name])
    return default


@dataclass
class Workloads(Record):
    """A session's workloads, each family's raw data under its key (``gsm8k``, ``bench``, ``lossless``, ``integrity``,
    ``integrity_checks``, ...): the results model names no family; a family reads its typed records from `part`
    through its own code (specsuite/families/<name>/records.py)."""

    def part(self, key: str) -> Any:
        """A family's data as written under `key` (None when the session wrote none)."""
        return self.extra.get(key)


# ---------------------------------------------------------------- arms and repeats


@dataclass
class FailedTest(Record):
    """One test of a session that failed or errored, with its one-line message (specsuite.orchestration.junit)."""

    test: str = ""  # "module::name"
    module: str | None = None
    function: str | None = None
    kind: str = "failed"  # failed | error
    message: str | None = None


@dataclass
class JunitOutcome(Record):
    """A session's JUnit outcome as ``specsuite run``'s merge records it (``repeats[].tests``)."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {"failed": ("list", FailedTest)}

    passed: int = 0
    skipped: int = 0
    failed: list[FailedTest] = field(default_factory=list)


@dataclass
class Repeat(Record):
    """One session of one arm. ``specsuite run`` adds how the session ran (exit code, folder, parts)."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {
        "cases": ("list", Case), "workloads": ("one", Workloads), "tests": ("one", JunitOutcome)}

    repeat: int = 1  # 1-based, in run order
    seed: int | None = None
    cases: list[Case] = field(default_factory=list)
    workloads: Workloads = field(default_factory=Workloads)
    exit_code: int | None = None
    session_dir: str | None = None
    log: str | None = None
    session_status: str | None = None
    wall_time_s: float | None = None
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    command: list[str] | None = None
    markers: str | None = None
    running: bool | None = None
    parts: list[dict[str, Any]] = field(default_factory=list)
    tests: JunitOutcome | None = None  # `specsuite run`: the session's JUnit outcome
    reason: str | None = None  # `specsuite run`: a session that tested nothing, its own one-line reason
    interrupted: bool | None = None  # `specsuite run`: the session was stopped by an interrupt
    load_average: float | None = None  # `specsuite run`: the test machine's 1-minute load average when the session ended


@dataclass
class Arm(Record):
    """One server (build) under test, and its repeats."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {"repeats": ("list", Repeat)}

    server_under_test: dict[str, Any] | None = None  # how it was chosen; whether it was the reference emulation
    identity: dict[str, Any] | None = None  # ServerIdentity.to_dict()
    vocab: dict[str, Any] | None = None  # VocabInfo.to_dict()
    spec: dict[str, Any] | None = None  # `specsuite run`: {name, url, launch}
    repeats: list[Repeat] = field(default_factory=list)

    def cases(self) -> list[Case]:
        """Every case of every repeat, in run order."""
        return [case for repeat in self.repeats for case in repeat.cases]

    def server_choice(self) -> ServerChoice:
        """How this arm's server was chosen, read typed (empty when no session reached it)."""
        return ServerChoice.from_dict(self.server_under_test or {})



# ---------------------------------------------------------------- the kernel suite


@dataclass
class InvariantOutcome(Record):
    """One invariant on one input class (specsuite.kernels.invariants): passed, or how many rows broke it."""

    input_class: str = ""
    invariant: str = ""
    passed: bool = False
    violations: int | None = None
    rows: int | None = None
    example: dict[str, Any] | None = None  # one row where it broke


@dataclass
class DistributionTest(Record):
    """One distribution test on well-formed input (specsuite.kernels.distribution): what it saw and its p-value."""

    name: str = ""
    n: int | None = None
    observed_rate: float | None = None
    expected_rate: float | None = None
    mean_difference: float | None = None
    difference_ci95: list[float] | None = None
    x2: float | None = None
    chi2: float | None = None
    categories: int | None = None
    p_value: float | None = None
    adjusted_p: float | None = None
    detectable_at_90_power: float | None = None
    rejected: bool | None = None
    note: str | None = None


@dataclass
class KernelDistribution(Record):
    """The distribution family: its tests, corrected together."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {"tests": ("list", DistributionTest)}

    correction: str | None = None
    family_size: int | None = None
    power: float | None = None
    tests: list[DistributionTest] = field(default_factory=list)


@dataclass
class KernelSection(Record):
    """The kernel suite's run (specsuite.kernels.suite): the kernel, its invariants and distribution tests."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {
        "invariants": ("list", InvariantOutcome), "distribution": ("one", KernelDistribution)}

    label: str | None = None
    kernel: str | None = None  # the --kernel value
    sha256: str | None = None  # the kernel file's; None for the reference numpy sampler
    device: str | None = None
    engine: str | None = None
    verification: str | None = None
    shape: dict[str, Any] | None = None  # batch, steps, kernel_vocab, tokenizer_vocab
    seed: int | None = None
    alpha: float | None = None
    classes: list[str] = field(default_factory=list)
    rules: dict[str, str] | None = None  # invariant -> what it requires
    invariants: list[InvariantOutcome] = field(default_factory=list)
    failing: list[str] = field(default_factory=list)
    distribution: KernelDistribution | None = None
    seconds: float | None = None

    def by_class(self) -> dict[str, dict[str, InvariantOutcome]]:
        """input class -> invariant -> outcome, in the order written."""
        found: dict[str, dict[str, InvariantOutcome]] = {}
        for outcome in self.invariants or []:
            found.setdefault(outcome.input_class, {})[outcome.invariant] = outcome
        return found


# ---------------------------------------------------------------- the A/B analysis


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


@dataclass
class RunFailure(Record):
    """Something that failed in one arm of a `specsuite run` (specsuite.orchestration.failures), with its one-line reason.

    kind: `tests` (tests failed or errored, from the sessions' JUnit), `server_errors` (requests the server failed),
    `harness_timeouts` (requests the harness gave up waiting for), `benchmark_errors` (benchmark requests that failed)."""

    arm: str = ""
    kind: str = ""
    count: int = 0
    reason: str = ""

    @property
    def line(self) -> str:
        return f"{self.arm}: {self.reason}"


# ---------------------------------------------------------------- the document


@dataclass
class Document(Record):
    """A whole results.json. The first five keys are always there (specsuite.results.store writes them)."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {
        "arms": ("map", Arm), "kernel": ("one", KernelSection), ANALYSIS_KEY: ("one", Comparison), "failures": ("list", RunFailure)}

    schema_version: int = SCHEMA_VERSION
    created_utc: str | None = None
    specsuite_version: str | None = None
    run_id: str | None = None
    status: str | None = None  # running | complete | interrupted | failed
    stopped_at: str | None = None  # interrupted runs: where
    error: str | None = None  # failed runs: why
    upgraded_from: int | None = None  # the schema version the file was written with, when older
    server_under_test: dict[str, Any] | None = None
    seed: int | None = None
    profile: str | None = None
    command: str | None = None
    warnings: list[str] = field(default_factory=list)
    faults: dict[str, Any] | None = None
    repeats: int | None = None  # `specsuite run`: repeats per arm
    markers: str | None = None  # `specsuite run`: the -m expression its sessions ran (None: the main job's parts)
    pytest_options: list[str] = field(default_factory=list)  # `specsuite run`: the options every session had
    side_by_side: bool | None = None  # `specsuite run`: the arms ran at the same time on one host
    sessions: list[dict[str, Any]] = field(default_factory=list)  # `specsuite run`: each session it started
    sessions_wall_time_s: float | None = None
    arm_order: list[str] = field(default_factory=list)
    baseline_arm: str | None = None
    arms: dict[str, Arm] = field(default_factory=dict)
    kernel: KernelSection | None = None
    ab_compare: Comparison | None = None  # ANALYSIS_KEY
    fail_on: dict[str, Any] | None = None  # FAIL_ON_KEY
    failures: list[RunFailure] = field(default_factory=list)  # `specsuite run`: what failed, arm by arm

    def option(self, flag: str) -> str | None:
        """The last value ``specsuite run`` gave its sessions for ``flag`` (``--flag V`` or ``--flag=V``)."""
        options = [str(o) for o in self.pytest_options]
        value = None
        for index, option in enumerate(options):
            if option == flag and index + 1 < len(options):
                value = options[index + 1]
            elif option.startswith(flag + "="):
                value = option.split("=", 1)[1]
        return value

    def ordered_arms(self) -> list[str]:
        """The arms in run order: ``arm_order`` when written, else as stored."""
        return list(self.arm_order or self.arms)

    @property
    def analysis(self) -> Comparison | None:
        return self.ab_compare


# ---------------------------------------------------------------- typed views of sections kept as dicts


@dataclass
class ArmVocab(Record):
    """An arm's ``vocab`` (specsuite.server.vocab.VocabInfo.to_dict), read typed where a rule needs its sizes."""

    tokenizer_length: int | None = None
    vocab_size: int | None = None
    padded_row_count: int | None = None


@dataclass
class ServerChoice(Record):
    """A ``server_under_test`` record (specsuite.server.session; the run's or an arm's): how the server was chosen and
    what it is, read typed."""

    kernel_only: bool | None = None  # a kernel-only session: no server at all
    embedded_reference: bool | None = None  # the embedded reference server, started because no server was given
    reference_emulation: bool | None = None  # specsuite's reference server (a CPU emulation), however it was reached
    source: str | None = None  # server-url, launch, embedded-reference (`specsuite run`'s document: arms)
    url: str | None = None
    version: str | None = None
    server_kind: str | None = None


@dataclass
class SpeculativeSettings(Record):
    """The speculative-decoding settings a server reports (an identity's ``speculative``), read typed."""

    speculative_algorithm: str | None = None
    speculative_num_steps: int | None = None
    speculative_eagle_topk: int | None = None
    speculative_num_draft_tokens: int | None = None
    speculative_use_rejection_sampling: bool | None = None


# A /server_info key only the reference server reports: how a reader tells the reference emulation from a real server.
REFERENCE_MARKER_KEY = "refserver_arm"


@dataclass
class SamplerDescription(Record):
    """The reference server's sampler (`refserver_sampler` among its server args)."""

    label: str | None = None
    device: str | None = None
    sha256: str | None = None


@dataclass
class ServerArgs(Record):
    """A server's args as its /server_info reports them: open-ended, so every arg but the two the reference server
    adds stays in ``extra`` (``to_dict`` gives them all back as written)."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {"refserver_sampler": ("one", SamplerDescription)}

    refserver_arm: Any = None  # REFERENCE_MARKER_KEY: written only by the reference server
    refserver_sampler: SamplerDescription | None = None


@dataclass
class ArmIdentity(Record):
    """An arm's ``identity`` (specsuite.server.identity.ServerIdentity.to_dict), read typed: by the history, to place a
    run in its configuration's trend, and by the reports."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {"speculative": ("one", SpeculativeSettings),
                                                             "server_args": ("one", ServerArgs)}

    base_url: str | None = None
    model_path: str | None = None
    served_model_name: str | None = None
    version: str | None = None
    tokenizer_length: int | None = None
    vocab_size: int | None = None
    speculative: SpeculativeSettings | None = None
    cuda_graph: Any = None
    server_args: ServerArgs | None = None

    @classmethod
    def of(cls, arm: Arm) -> ArmIdentity:
        """The arm's identity; an empty one when the arm has none (or not an object)."""
        return cls.from_dict(arm.identity if isinstance(arm.identity, dict) else {})

    def is_reference(self) -> bool:
        """Whether the reference server reported it (it names REFERENCE_MARKER_KEY among its server args)."""
        return self.server_args is not None and self.server_args.has(REFERENCE_MARKER_KEY)


@dataclass
class FailOnVerdict(Record):
    """A document's ``fail_on`` outcome (specsuite.analysis.fail_on.FailOnOutcome.to_dict), read typed: whether a rule fired."""

    failed: bool | None = None


# ---------------------------------------------------------------- the history's trends (trends.json)


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


# ---------------------------------------------------------------- the kernel suite's distribution tests, as they run


@dataclass
class MonteCarloResolution(Record):
    """What a kernel distribution family's Monte Carlo X^2 tests can reach (specsuite.kernels.distribution)."""

    draws: int = 0
    smallest_p_value: float = 1.0
    family_size: int = 0
    largest_family_x2_can_reject: int = 0
    x2_can_reject: bool = False


@dataclass
class KernelTestStatistic(Record):
    """What one kernel distribution test saw, written beside its p-value: the X^2 tests' categories and statistic,
    the acceptance test's counts, the accepted-length test's means, the rule test's totals (and its details in extra)."""

    categories: int | None = None
    outside_support: int | None = None  # ids the target gives zero probability
    min_expected: float | None = None
    x2: float | None = None
    monte_carlo_draws: int | None = None
    monte_carlo_seed: int | None = None
    from_sampler: int | None = None  # rows whose token at the position came from the sampler
    accepted: int | None = None
    observed_rate: float | None = None
    expected_rate: float | None = None
    block_mean_accepted: float | None = None
    token_mean_accepted: float | None = None
    mean_difference: float | None = None
    difference_ci95: list[float] | None = None
    rows_block_longer: int | None = None
    rows_token_longer: int | None = None
    verification: str | None = None
    observed_total: float | None = None
    expected_total: float | None = None
