"""The specsuite pytest plugin's session part: registers its options, resolves the server under test (through the
RunSession, whose family drivers run the workloads: specsuite/families/<name>/driver.py), prints its identity, gives
the suites the `specsuite` fixture, and reports: results.json as results arrive, the terminal summary. The
parametrization of each family's tests lives in that family's plugin module (its registry entry's `pytest_plugin`).

The server is resolved only when the run targets suites/ (or names a server explicitly) and some
selected test needs it (uses the `specsuite` fixture), decided after collection and deselection:
`pytest tests/` and `pytest suites/ -m kernel` never start one.  Resolution order: --server-url,
then --launch CMD, else the embedded reference server (fix arm) on a free port.  A failure to reach the server is one line
and exit code 4 (pytest's usage-error code), with no traceback.

The embedded fallback never passes for a real server unnoticed: the report header's first line and
the terminal summary's last section name the server under test (in capitals when it is the
reference emulation), results.json carries `server_under_test`, and `--require-server-url` or
`--specsuite-profile nightly` refuses the fallback (exit 4, one line).  Warnings that the workloads collect
(a refused /flush_cache, say) are listed in the terminal summary and stored in results.json.

Requests share one `specsuite.server.faults.FaultGuard` (policy from --fault-policy); when it stops the run,
pytest stops after the current test and results.json says why.  SIGTERM is handled like Ctrl-C, so a
terminated session still writes JUnit XML and results.json and stops a launched server.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pytest

from specsuite.errors import SpecsuiteError
from specsuite.families.bench.records import bench_runs
from specsuite.families.correctness.family import FAMILY as CORRECTNESS_FAMILY
from specsuite.families.gsm8k.family import FAMILY as GSM8K_FAMILY
from specsuite.families.gsm8k.records import Gsm8kRun
from specsuite.orchestration.failures import run_failures
from specsuite.project_paths import SUITES_DIR
from specsuite.results.builder import measured_arm, session_document
from specsuite.results.store import RunDirectory
from specsuite.results.types import Case, Document, ServerChoice, Workloads
from specsuite.server.interrupts import terminate_as_interrupt
from specsuite.server.secrets import load_admin_api_key, load_api_key
from specsuite.server.session import ServerUnderTest, describe_server_under_test
from specsuite.session.config import RunConfig, run_config_from_options
from specsuite.session.config_file import CONFIG_FILE_OPTION, read_config_file
from specsuite.session.dependencies import missing_for_results_db, preflight
from specsuite.session.option_table import add_pytest_options, check_values, deprecation_notes, given_options
from specsuite.session.run_session import RunSession

CORRECTNESS, GSM8K = CORRECTNESS_FAMILY.name, GSM8K_FAMILY.name  # the drivers the suites call through the `specsuite` fixture


def _argument_path(arg: str, config: pytest.Config) -> Path:
    """Where a command-line argument points: a path, or with --pyargs a package or module (`specsuite.suites`, `specsuite.suites.test_gsm8k`)."""
    path = Path(config.invocation_params.dir, arg).resolve()
    if config.getoption("pyargs") and not path.exists():
        try:
            spec = importlib.util.find_spec(arg)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.origin:
            return Path(spec.origin).resolve().parent if spec.submodule_search_locations else Path(spec.origin).resolve()
    return path


@dataclass
class SpecsuiteSession:
    """The pytest adapter over one RunSession (specsuite/session/): pytest's options become a RunConfig; the workloads run
    in the families' drivers the RunSession holds (specsuite/families/<name>/driver.py), which the suites reach through
    the methods below; what only pytest does stays here (stopping pytest when the guard stops, results.json's document)."""

    config: pytest.Config
    pytest_session: pytest.Session | None = None
    sections: dict[str, Any] = field(default_factory=dict)  # other top-level results sections (the kernel suite's)
    _core: RunSession | None = None

    @cached_property
    def run_config(self) -> RunConfig:
        """The typed run configuration from pytest's options (the same function builds the CLI's), or as a whole from
        the --specsuite-config file (`specsuite run`'s sessions), built once; the suites read their settings here
        (`specsuite.run_config.lossless.pit_requests`), never by option name."""
        path = self.config.getoption("specsuite_config", default=None)
        if path:
            return read_config_file(path, api_key=load_api_key(), admin_api_key=load_admin_api_key())
        return run_config_from_options(lambda name: self.config.getoption(name, default=None), front_end="pytest",
                                       api_key=load_api_key(), admin_api_key=load_admin_api_key())

    @property
    def core(self) -> RunSession:
        """The session that knows nothing of pytest; built on first use (after the options were checked)."""
        if self._core is None:
            self._core = RunSession(self.run_config, document=self._document, after_workload=self._stop_pytest_if_guard_stopped)
        return self._core

    # What the suites' plugins read and write, kept on the RunSession.
    server = property(lambda self: self._core.server if self._core else None)
    writer = property(lambda self: self._core.writer if self._core else None)
    guard = property(lambda self: self._core.guard if self._core else None)
    in_progress = property(lambda self: self._core.in_progress if self._core else None)
    workloads = property(lambda self: self.core.workloads)

    # The correctness and GSM8K drivers, as the suites call them (suites/test_correctness.py, test_ab.py, test_gsm8k.py).
    correctness = property(lambda self: self.core.driver(CORRECTNESS))
    prompts = property(lambda self: self.correctness.prompts)
    cases = property(lambda self: self.correctness.cases)
    case_result = property(lambda self: self.correctness.case_result)
    baseline_case_result = property(lambda self: self.correctness.baseline_case_result)
    reference_case_result = property(lambda self: self.correctness.reference_case_result)
    gsm8k_result = property(lambda self: self.core.driver(GSM8K).result)

    @property
    def run_dir(self) -> RunDirectory | None:
        return self._core.run_dir if self._core else None

    @run_dir.setter
    def run_dir(self, value: RunDirectory | None) -> None:  # the kernel suite opens one when no server is started
        self.core.run_dir = value

    def targets_suites(self) -> bool:
        """True when the run collects from suites/ or names a server."""
        server = self.run_config.server
        if server.server_url or server.launch:
            return True
        for arg in self.config.args:
            path = _argument_path(arg.split("::")[0], self.config)
            if path == SUITES_DIR or SUITES_DIR in path.parents:
                return True
        return False

    def start(self) -> ServerUnderTest:
        """Resolve, reach and identify the server; open the results folder (the drivers load what they need)."""
        server = self.core.start()
        self.write_results("running")
        return server

    def _stop_pytest_if_guard_stopped(self) -> None:
        """Once the fault policy stops the run, stop pytest too."""
        if self.guard is not None and self.guard.stopped and self.pytest_session is not None:
            self.pytest_session.shouldstop = f"specsuite fault policy stopped the run: {self.guard.stop_reason}"

    def warnings(self) -> list[str]:
        """Every warning the workloads collected so far, in run order."""
        return self.core.warnings() if self._core is not None else []
        found = [line for result in self.cases.values() for line in result.warnings]
        found += [line for run in self.gsm8k_runs.values() for line in Gsm8kRun.from_dict(run).warnings or []]
        for bench in bench_runs(Workloads.from_dict(self.workloads)):  # none unless the benchmark wrote its summary
            found += [f"serving benchmark: {line}" for line in bench.warnings or []]
        return found

    def write_results(self, status: str) -> None:
        if self.run_dir is not None:
            self.core.write_results(status)

    def document_now(self) -> Document:
        """The session's results as they stand (what its results.json holds)."""
        return self._document("running")

    def _document(self, status: str) -> Document:
        seed = self.run_config.seed
        arms = {} if self.server is None else {  # a kernel-only session has no server
            self.server.arm: measured_arm(self.server, [Case.from_dict(result.to_dict()) for result in self.cases.values()],
                                          Workloads.from_dict(dict(self.workloads)), seed)}
        baseline = self.correctness.baseline if self._core is not None else None
        if baseline is not None:
            arms["baseline"] = measured_arm(baseline, [Case.from_dict(result.to_dict()) for result in self.correctness.baseline_cases.values()],
                                            Workloads(), seed)
        return session_document(
            status=status, server_under_test=self.server.server_under_test if self.server is not None else KERNEL_ONLY_UNDER_TEST,
            warnings=self.warnings(), seed=seed, profile=self.run_config.profile, command=" ".join(sys.argv),
            faults=self.guard.summary() if self.guard is not None else None, arms=arms, sections=self.sections)

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
        if self._core is not None:
            self._core.close()  # the drivers' other servers (the A/B baseline, the lossless reference) too


# A kernel-only session (-m kernel) tests a sampler kernel and starts no server.
KERNEL_ONLY_UNDER_TEST = {"kernel_only": True, "embedded_reference": False, "reference_emulation": False}

SESSION_KEY = pytest.StashKey[SpecsuiteSession]()


def specsuite_session(config: pytest.Config) -> SpecsuiteSession:
    return config.stash[SESSION_KEY]


RESTORE_SIGTERM_KEY = pytest.StashKey[Callable[[], None]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    add_pytest_options(parser.getgroup, "pytest_plugin")  # the fault policy and --require-server-url (specsuite/session/option_table.py)


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
        check_config_file_alone(session.config)
        # The results database's driver, before the first test: a night that cannot be stored must not run green.
        missing = missing_for_results_db(state.run_config.history.results_db)
        if missing:
            raise SpecsuiteError(missing)
    except SpecsuiteError as exc:
        raise pytest.UsageError(f"specsuite: {exc}") from None


def check_config_file_alone(config: pytest.Config) -> None:
    """--specsuite-config holds every setting: another specsuite option beside it would be silently ignored, so it is
    refused; the file itself is read now, so a missing or stale one is one line before anything runs."""
    if not config.getoption("specsuite_config", default=None):
        return
    given, _ = given_options(config.invocation_params.args, "pytest")
    others = [flag for flag in given if flag != CONFIG_FILE_OPTION]
    if others:
        raise SpecsuiteError(f"{CONFIG_FILE_OPTION} holds every setting of the session; {', '.join(others)} cannot be given with it")
    specsuite_session(config).run_config  # noqa: B018 - read (and checked) before anything is collected


def needs_server(items: list[pytest.Item]) -> bool:
    return any(SERVER_FIXTURE in getattr(item, "fixturenames", ()) for item in items)


@pytest.hookimpl(trylast=True)  # after -m/-k deselection; the other plugins wire up in pytest_collection_finish
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    state = specsuite_session(config)
    try:
        if not state.targets_suites() or not needs_server(items):
            return
        config = state.run_config
        missing = preflight(gsm8k_path=config.gsm8k.path, uses_gsm8k=any(item.get_closest_marker("gsm8k") for item in items),
                            tokenizer=config.server.tokenizer, results_dir=config.results_dir)
        if missing:  # one line naming the extra or the path, before any server starts (not a traceback per test)
            raise SpecsuiteError(missing)
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
    others = [plugin for name, plugin in plugins if plugin is not None and not name.startswith("specsuite.pytest_plugin.")]
    header = session.config.pluginmanager.subset_hook_caller("pytest_report_header", others)
    for lines in reversed(header(config=session.config, start_path=session.config.rootpath)):
        for line in [lines] if isinstance(lines, str) else lines:
            reporter.write_line(line)


def pytest_report_header(config: pytest.Config) -> list[str]:
    state = specsuite_session(config)
    if state.server is None:
        return []
    lines = [f"specsuite {describe_server_under_test(state.server.server_under_test)}", *state.server.identity.header_lines()]
    lines.append(f"specsuite arm: {state.server.arm}; profile {state.run_config.profile}; results {state.run_dir.path if state.run_dir else '-'}")
    return lines


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    specsuite_session(session.config).finish(int(exitstatus))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Last words of the session: its warnings, then which server the results belong to."""
    state = specsuite_session(config)
    if state.server is None:
        return
    under_test = state.server.server_under_test
    choice = ServerChoice.from_dict(under_test)
    emulation = choice.embedded_reference or choice.reference_emulation
    terminalreporter.section("specsuite", sep="=", yellow=bool(emulation), bold=True)
    for line in state.warnings():
        terminalreporter.write_line(f"specsuite {line}", yellow=True)
    # Failed and timed-out requests, told apart (pytest lists the failed tests itself).
    requests = [f for f in run_failures(state.document_now(), state.run_config.server.request_timeout_s, load_now=True) if f.kind != "tests"]
    for failure in requests:
        terminalreporter.write_line(f"specsuite failed: {failure.line}", red=True)
    terminalreporter.write_line(f"specsuite {describe_server_under_test(under_test)}", yellow=bool(emulation), bold=bool(emulation))


@pytest.fixture(scope="session")
def specsuite(pytestconfig: pytest.Config) -> SpecsuiteSession:
    """The session state; skips when no server was resolved (suites collected without targeting)."""
    state = specsuite_session(pytestconfig)
    if state.server is None:
        pytest.skip("no server under test: run `pytest suites/` or pass --server-url/--launch")
    return state
