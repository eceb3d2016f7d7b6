"""The specsuite pytest plugin: resolves the server under test, prints its identity, parametrizes
the sampling grid, runs each case once per session, and writes results as they arrive.

The server is resolved only when the run targets suites/ (or names a server explicitly) and some
selected test needs it (uses the `specsuite` fixture), decided after collection and deselection:
`pytest tests/` and `pytest suites/ -m kernel` never start one.  Resolution order: --server-url,
then --launch CMD, else the embedded reference server (fix arm) on a free port.  A failure to reach the server is one line
and exit code 4 (pytest's usage-error code), with no traceback.

The embedded fallback never passes for a real server unnoticed: the report header's first line and
the terminal summary's last section name the server under test (in capitals when it is the
reference emulation), results.json carries `server_under_test`, and `--require-server-url` or
`--profile nightly` refuses the fallback (exit 4, one line).  Warnings that the workloads collect
(a refused /flush_cache, say) are listed in the terminal summary and stored in results.json.

Requests share one `harness.server.faults.FaultGuard` (policy from --fault-policy); when it stops the run,
pytest stops after the current test and results.json says why.  SIGTERM is handled like Ctrl-C, so a
terminated session still writes JUnit XML and results.json and stops a launched server.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from harness.cli.options import add_pytest_options, check_values, deprecation_notes, parse_option
from harness.errors import SpecsuiteError
from harness.results.builder import measured_arm, session_document
from harness.results.store import RecordWriter, RunDirectory
from harness.server.faults import FaultGuard, RunPolicy, process_alive_probe
from harness.server.interrupts import terminate_as_interrupt
from harness.server.secrets import load_admin_api_key, load_api_key, load_secrets
from harness.server.session import ServerUnderTest, check_server_given, describe_server_under_test, open_server
from harness.workloads.correctness.prompts import PromptItem, load_prompts
from harness.workloads.correctness.workload import PROFILES, CaseResult, SamplingCase, run_case, sampling_grid
from harness.workloads.gsm8k import load_gsm8k
from harness.workloads.gsm8k.on_server import run_gsm8k_on_server, temperature_key

SUITES_DIR = Path(__file__).resolve().parent


def remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()  # only an empty folder goes
    except OSError:
        pass


@dataclass
class SpecsuiteSession:
    """Per-session state: options, the server, the results folder and the cached case results."""

    config: pytest.Config
    server: ServerUnderTest | None = None
    run_dir: RunDirectory | None = None
    writer: RecordWriter | None = None
    cases: dict[str, CaseResult] = field(default_factory=dict)
    prompts: list[PromptItem] = field(default_factory=list)
    workloads: dict[str, Any] = field(default_factory=dict)  # stored under arms.<arm>.repeats[0].workloads
    gsm8k_runs: dict[str, dict[str, Any]] = field(default_factory=dict)  # by temperature
    baseline: ServerUnderTest | None = None
    baseline_cases: dict[str, CaseResult] = field(default_factory=dict)
    guard: FaultGuard | None = None
    pytest_session: pytest.Session | None = None
    in_progress: str | None = None  # the workload running now, for "where it stopped"
    sections: dict[str, Any] = field(default_factory=dict)  # other top-level results sections (the kernel suite's)

    def option(self, name: str) -> Any:
        return self.config.getoption(name)

    def targets_suites(self) -> bool:
        """True when the run collects from suites/ or names a server."""
        if self.option("server_url") or self.option("launch"):
            return True
        for arg in self.config.args:
            path = Path(self.config.invocation_params.dir, arg.split("::")[0]).resolve()
            if path == SUITES_DIR or SUITES_DIR in path.parents:
                return True
        return False

    @property
    def grid(self) -> list[SamplingCase]:
        return sampling_grid(parse_option("--temperatures", self.option("temperatures")), parse_option("--top-p", self.option("top_p")))

    @property
    def profile(self):
        return PROFILES[self.option("profile")]

    def require_reason(self) -> str | None:
        """The option that forbids the embedded fallback, or None when it is allowed."""
        if self.option("require_server_url"):
            return "--require-server-url"
        if self.option("profile") == "nightly":
            return "--profile nightly"
        return None

    def start(self) -> ServerUnderTest:
        """Resolve, reach and identify the server; open the results folder."""
        api_key = load_api_key()
        admin_api_key = load_admin_api_key()
        policy = RunPolicy.parse(self.option("fault_policy"))
        # Refuse a forbidden fallback before the results folder exists: nothing was run.
        check_server_given(self.option("server_url"), self.option("launch"), self.require_reason() is not None,
                           self.require_reason() or "")
        self.run_dir = RunDirectory(self.option("results_dir"), run_id=self.option("run_id"), secrets=load_secrets())
        try:
            self.server = open_server(
                server_url=self.option("server_url"), launch=self.option("launch"), log_dir=self.run_dir.path, api_key=api_key,
                arm=self.option("arm_name"), tokenizer=self.option("tokenizer"), vocab_size=self.option("vocab_size"),
                launch_url_override=self.option("launch_url"), ready_timeout_s=self.option("launch_timeout"),
                admin_api_key=admin_api_key, server_kind=self.option("server_kind"),
            )
        except (SpecsuiteError, KeyboardInterrupt):
            remove_if_empty(self.run_dir.path)  # a server never reached leaves no empty timestamped folder (a launch log stays)
            self.run_dir = None
            raise
        launched = self.server.launched
        self.guard = FaultGuard(policy, server_alive=process_alive_probe(lambda: launched.running) if launched is not None else None)
        self.prompts = load_prompts(self.option("prompts"))
        self.writer = self.run_dir.record_writer(self.server.arm)
        self.write_results("running")
        return self.server

    def case_result(self, case: SamplingCase) -> CaseResult:
        """Run a case once per session; later tests read the cached result."""
        if case.case_id not in self.cases:
            assert self.server is not None
            with self._watch(f"case {case.case_id}"):
                self.cases[case.case_id] = run_case(
                    self.server.client, self.server.vocab, case, self.prompts, self.profile,
                    seed=self.option("seed"), record_sink=self.writer.write if self.writer else None, guard=self.guard,
                )
            self.write_results("running")
        return self.cases[case.case_id]

    @contextmanager
    def _watch(self, what: str) -> Iterator[None]:
        """Name the workload in progress; once the fault policy stops the run, stop pytest too."""
        self.in_progress = what
        interrupted = False
        try:
            yield
        except KeyboardInterrupt:
            interrupted = True  # finish() names the workload it stopped in
            raise
        finally:
            if not interrupted:
                self.in_progress = None
            if self.guard is not None and self.guard.stopped and self.pytest_session is not None:
                self.pytest_session.shouldstop = f"specsuite fault policy stopped the run: {self.guard.stop_reason}"

    def baseline_case_result(self, case: SamplingCase) -> CaseResult:
        """The same case on the --baseline-url server (connected on first use)."""
        if self.baseline is None:
            self.baseline = open_server(server_url=self.option("baseline_url"), launch=None, log_dir=self.run_dir.path,
                                        api_key=load_api_key(), arm="baseline", tokenizer=self.option("tokenizer"),
                                        vocab_size=self.option("vocab_size"), admin_api_key=load_admin_api_key())
        if case.case_id not in self.baseline_cases:
            writer = self.run_dir.record_writer("baseline")
            with self._watch(f"baseline case {case.case_id}"):
                self.baseline_cases[case.case_id] = run_case(self.baseline.client, self.baseline.vocab, case, self.prompts, self.profile,
                                                             seed=self.option("seed"), record_sink=writer.write, guard=self.guard)
            self.write_results("running")
        return self.baseline_cases[case.case_id]

    def gsm8k_result(self, temperature: float) -> dict[str, Any]:
        """Run GSM8K once per session and temperature; records go to gsm8k.jsonl as they finish."""
        key = temperature_key(temperature)
        runs = self.gsm8k_runs
        if key not in runs:
            assert self.server is not None and self.run_dir is not None
            items = load_gsm8k(self.option("gsm8k_path"))
            writer = self.run_dir.record_writer(self.server.arm, "gsm8k")
            with self._watch(f"gsm8k {key}"):
                runs[key] = run_gsm8k_on_server(
                    self.server.client, self.server.vocab, items, temperature=temperature,
                    num_questions=self.option("gsm8k_num_questions"), num_shots=self.option("gsm8k_num_shots"),
                    parallel=self.option("gsm8k_parallel"), seed=self.option("seed"), shots_from_eval=self.option("gsm8k_shots_from_eval"),
                    record_sink=lambda record: writer.write({"temperature": temperature, **record}), guard=self.guard,
                )
                runs[key]["source"] = self.option("gsm8k_path")  # the report says when it was the synthetic set
            self.workloads["gsm8k"] = list(runs.values())  # one result per temperature
            self.write_results("running")
        return runs[key]

    @property
    def gsm8k_temperatures(self) -> list[float]:
        return parse_option("--gsm8k-temperatures", self.option("gsm8k_temperatures"))

    def warnings(self) -> list[str]:
        """Every warning the workloads collected so far, in run order."""
        found = [line for result in self.cases.values() for line in result.warnings]
        found += [line for run in self.gsm8k_runs.values() for line in run.get("warnings") or []]
        bench = self.workloads.get("bench")
        if isinstance(bench, dict):
            found += [f"serving benchmark: {line}" for line in bench.get("warnings") or []]
        return found

    def write_results(self, status: str) -> None:
        if self.run_dir is None:
            return
        seed = self.option("seed")
        arms = {} if self.server is None else {  # a kernel-only session has no server
            self.server.arm: measured_arm(self.server, [result.to_dict() for result in self.cases.values()], self.workloads, seed)}
        if self.baseline is not None:
            arms["baseline"] = measured_arm(self.baseline, [result.to_dict() for result in self.baseline_cases.values()], {}, seed)
        self.run_dir.write_results(session_document(
            status=status, server_under_test=self.server.server_under_test if self.server is not None else KERNEL_ONLY_UNDER_TEST,
            warnings=self.warnings(), seed=seed, profile=self.option("profile"), command=" ".join(sys.argv),
            faults=self.guard.summary() if self.guard is not None else None, arms=arms, sections=self.sections))

    def finish(self, exitstatus: int) -> None:
        """Final results.json: complete, or interrupted with where it stopped; then tear down."""
        stop_reason = self.guard.stop_reason if self.guard is not None else None
        if exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) and stop_reason is None:
            self.write_results("complete")
        elif self.run_dir is not None and self.server is not None:
            self.write_results("running")
            done = ", ".join(self.cases) or "none"
            why = f"fault policy: {stop_reason}" if stop_reason else f"pytest exit {exitstatus}"
            during = f"; during {self.in_progress}" if self.in_progress else ""
            self.run_dir.mark_interrupted(f"{why}{during}; finished cases: {done}; workloads: {', '.join(self.workloads) or 'none'}")
        if self.run_dir is not None:
            self.run_dir.close()
        for server in (self.server, self.baseline):
            if server is not None:
                server.close()


# A kernel-only session (-m kernel) tests a sampler kernel and starts no server.
KERNEL_ONLY_UNDER_TEST = {"kernel_only": True, "embedded_reference": False, "reference_emulation": False}

SESSION_KEY = pytest.StashKey[SpecsuiteSession]()


def specsuite_session(config: pytest.Config) -> SpecsuiteSession:
    return config.stash[SESSION_KEY]


RESTORE_SIGTERM_KEY = pytest.StashKey[Callable[[], None]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    add_pytest_options(parser.getgroup, "pytest_plugin")  # the fault policy and --require-server-url (harness/cli/options.py)


def pytest_configure(config: pytest.Config) -> None:
    for note in deprecation_notes(config.invocation_params.args, "pytest"):
        print(f"specsuite: {note}", file=sys.stderr)
    config.stash[SESSION_KEY] = SpecsuiteSession(config)
    config.stash[RESTORE_SIGTERM_KEY] = terminate_as_interrupt()


def pytest_unconfigure(config: pytest.Config) -> None:
    config.stash[RESTORE_SIGTERM_KEY]()


SERVER_FIXTURE = "specsuite"  # every server-backed test depends on it, directly or through other fixtures


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    state = specsuite_session(session.config)
    state.pytest_session = session
    try:
        # Every option of the table, before anything is collected or any server starts: one line naming it (exit 4).
        check_values(vars(session.config.option), "pytest")
    except SpecsuiteError as exc:
        raise pytest.UsageError(f"specsuite: {exc}") from None


def needs_server(items: list[pytest.Item]) -> bool:
    return any(SERVER_FIXTURE in getattr(item, "fixturenames", ()) for item in items)


@pytest.hookimpl(trylast=True)  # after -m/-k deselection; the other plugins wire up in pytest_collection_finish
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    state = specsuite_session(config)
    if not state.targets_suites() or not needs_server(items):
        return
    try:
        state.start()
    except SpecsuiteError as exc:
        raise pytest.UsageError(f"specsuite: {exc}") from None


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """The server's identity lines, now that it is known (pytest printed its header before collection)."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or specsuite_session(session.config).server is None:
        return
    plugins = session.config.pluginmanager.list_name_plugin()
    others = [plugin for name, plugin in plugins if plugin is not None and not name.startswith("suites.")]
    header = session.config.pluginmanager.subset_hook_caller("pytest_report_header", others)
    for lines in reversed(header(config=session.config, start_path=session.config.rootpath)):
        for line in [lines] if isinstance(lines, str) else lines:
            reporter.write_line(line)


def pytest_report_header(config: pytest.Config) -> list[str]:
    state = specsuite_session(config)
    if state.server is None:
        return []
    lines = [f"specsuite {describe_server_under_test(state.server.server_under_test)}", *state.server.identity.header_lines()]
    lines.append(f"specsuite arm: {state.server.arm}; profile {state.option('profile')}; results {state.run_dir.path if state.run_dir else '-'}")
    return lines


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    specsuite_session(session.config).finish(int(exitstatus))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Last words of the session: its warnings, then which server the results belong to."""
    state = specsuite_session(config)
    if state.server is None:
        return
    under_test = state.server.server_under_test
    emulation = under_test.get("embedded_reference") or under_test.get("reference_emulation")
    terminalreporter.section("specsuite", sep="=", yellow=bool(emulation), bold=True)
    for line in state.warnings():
        terminalreporter.write_line(f"specsuite {line}", yellow=True)
    terminalreporter.write_line(f"specsuite {describe_server_under_test(under_test)}", yellow=bool(emulation), bold=bool(emulation))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    state = specsuite_session(metafunc.config)
    try:
        grid = state.grid
    except SpecsuiteError:
        grid = []
    if "sampling_case" in metafunc.fixturenames:
        metafunc.parametrize("sampling_case", grid, ids=[c.case_id for c in grid])
    if "gsm8k_temperature" in metafunc.fixturenames:
        try:
            temperatures = state.gsm8k_temperatures
        except SpecsuiteError:
            temperatures = []
        metafunc.parametrize("gsm8k_temperature", temperatures, ids=[temperature_key(t) for t in temperatures])
    if "sampled_case" in metafunc.fixturenames:
        sampled = [c for c in grid if not c.greedy]
        metafunc.parametrize("sampled_case", sampled, ids=[c.case_id for c in sampled])


@pytest.fixture(scope="session")
def specsuite(pytestconfig: pytest.Config) -> SpecsuiteSession:
    """The session state; skips when no server was resolved (suites collected without targeting)."""
    state = specsuite_session(pytestconfig)
    if state.server is None:
        pytest.skip("no server under test: run `pytest suites/` or pass --server-url/--launch")
    return state
