"""A results document down to one case: the `Document`, its `Arm`s and their `Repeat`s (a session: its `Case`s, its
`Workloads`, its JUnit outcome), and what a `specsuite run` found failed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from specsuite.results.types.comparison import Comparison
from specsuite.results.types.identity import ServerChoice
from specsuite.results.types.kernel import KernelSection
from specsuite.results.types.record import Record

SCHEMA_VERSION = 3
ANALYSIS_KEY = "ab_compare"  # the A/B analysis (specsuite.analysis.verdicts.compare_arms)
FAIL_ON_KEY = "fail_on"  # the --fail-on outcome (specsuite.analysis.fail_on)

# The reference server's counters the run summary shows, named once here for every reader
# (specsuite.server.refserver_contract exports them; tests/compare/test_metric_registry.py holds them equal).
NONFINITE_COUNTER = "specsuite_refserver:draft_probs_nonfinite_entries_total"
FALLBACK_COUNTER = "specsuite_refserver:sampler_fallback_emissions_total"


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

    def __eq__(self, other: object) -> bool:  # every part is in `extra`, which records leave out of equality
        return isinstance(other, Workloads) and self.extra == other.extra


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
