"""Nightly history for the suites: store the session in the results database, take the baseline from it,
and put the server's identity into JUnit XML.

Options (group "specsuite", declared in specsuite/session/option_table.py):

- `--results-db URL`: when the session ends with its checks run (exit 0 or 1), store its
  results.json in the history (outcome "passed" or "failed"); default env SPECSUITE_RESULTS_DB, as for
  `specsuite history`. With neither given the session stores nothing (unlike `specsuite history`,
  which then uses specsuite-results/history.sqlite), so `--compare-to` refuses to run (exit 4).
- `--compare-to last-good|RUN_ID`: the baseline for suites/test_nightly_regression.py, from the
  history: the newest passed run of tonight's configuration and arm, or that run id (refused,
  exit 4, when its configuration differs).  Needs `--results-db`.
- `--build-hash H` (env SPECSUITE_BUILD_HASH), `--accelerator A` (env SPECSUITE_ACCELERATOR):
  labels stored with the run; the accelerator is part of the configuration fingerprint.

Fixture `history_baseline` (session): the `HistoryBaseline`, or a skip saying why there is none.
With `--junit-xml`, the root <testsuite> gets `specsuite.*` properties: server URL, version,
model, vocabulary, speculative settings, CUDA graphs, arm, build, accelerator, configuration
fingerprint, profile, seed, results folder and the baseline run.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from specsuite.errors import SpecsuiteError
from specsuite.history import HistoryBaseline, HistoryStore, config_from_identity, config_key, items_from_file, parse_compare_to, resolve_baseline
from specsuite.results.types import ArmIdentity, ServerChoice, SpeculativeSettings
from specsuite.session.option_table import add_pytest_options

if TYPE_CHECKING:
    from specsuite.pytest_plugin.core import SpecsuiteSession

STORED_EXIT_CODES = {int(pytest.ExitCode.OK): "passed", int(pytest.ExitCode.TESTS_FAILED): "failed"}


def pytest_addoption(parser: pytest.Parser) -> None:
    add_pytest_options(parser.getgroup, "history")  # --results-db, --compare-to, --build-hash, --accelerator (specsuite/session/option_table.py)


@dataclass
class HistoryState:
    """What this session knows about the history: tonight's configuration and the baseline."""

    config: dict[str, Any]
    config_key: str
    baseline: HistoryBaseline | None = None
    missing_reason: str = "no --compare-to: no history baseline"
    error: str | None = None
    summary: list[str] = field(default_factory=list)  # printed in the terminal summary


def specsuite_state(config: pytest.Config) -> SpecsuiteSession:
    # Imported here, not at module level: the specsuite plugin must be registered (and
    # assertion-rewritten) by conftest before this module touches it.
    from specsuite.pytest_plugin.core import specsuite_session

    return specsuite_session(config)


HISTORY_KEY = pytest.StashKey[HistoryState]()


def _tonight(state: SpecsuiteSession) -> tuple[dict[str, Any], str]:
    assert state.server is not None
    run_config = state.run_config
    identity = ArmIdentity.from_dict(state.server.identity.to_dict())
    config = config_from_identity(identity, profile=run_config.profile, accelerator=run_config.history.accelerator)
    return config, config_key(config)


def _wire_history(session: pytest.Session) -> None:
    """After the specsuite plugin reached the server: fingerprint tonight and find the baseline."""
    state = specsuite_state(session.config)
    if state.server is None:
        return
    config, key = _tonight(state)
    history = HistoryState(config, key)
    session.config.stash[HISTORY_KEY] = history
    settings = state.run_config.history
    spec_text = settings.compare_to
    if not spec_text:
        return
    try:
        if not settings.results_db:
            raise SpecsuiteError("--compare-to needs --results-db (the history to take the baseline from)")
        spec = parse_compare_to(spec_text)
        with HistoryStore.open(settings.results_db) as store:
            history.baseline = resolve_baseline(store, spec, config_key=key, config=config, arm=state.server.arm)
    except SpecsuiteError as exc:
        history.error = str(exc)  # reported at collection end, where pytest.exit still tears the server down
        return
    if history.baseline is None:
        history.missing_reason = (f"no passed run of configuration {key} and arm {state.server.arm!r} in the history yet "
                                  "(first night?): nothing to compare against")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    _wire_history(session)  # the server starts after collection, once a selected test needs it
    history = session.config.stash.get(HISTORY_KEY, None)
    if history is not None and history.error:
        pytest.exit(f"specsuite: {history.error}", returncode=pytest.ExitCode.USAGE_ERROR)


def pytest_report_header(config: pytest.Config) -> list[str]:
    history = config.stash.get(HISTORY_KEY, None)
    if history is None:
        return []
    accelerator = specsuite_state(config).run_config.history.accelerator  # the one tonight's configuration records
    lines = [f"specsuite config {history.config_key}; accelerator {accelerator or 'unrecorded'}"]
    if history.baseline is not None:
        lines.append(f"specsuite history baseline: {history.baseline.describe()}")
    elif specsuite_state(config).run_config.history.compare_to and not history.error:
        lines.append(f"specsuite history baseline: none ({history.missing_reason})")
    return lines


@pytest.fixture(scope="session")
def history_baseline(pytestconfig: pytest.Config) -> HistoryBaseline:
    """The baseline run from the history (`--compare-to`); skips with the reason when there is none."""
    history = pytestconfig.stash.get(HISTORY_KEY, None)
    if history is None:
        pytest.skip("no server under test: run `pytest suites/` or pass --server-url/--launch")
    if history.baseline is None:
        pytest.skip(history.missing_reason)
    return history.baseline


def identity_properties(state: SpecsuiteSession, history: HistoryState) -> dict[str, Any]:
    """The `specsuite.*` JUnit properties: which server, build and configuration the suite measured."""
    assert state.server is not None
    identity = state.server.identity
    spec = SpeculativeSettings.from_dict(identity.speculative or {})
    under_test = ServerChoice.from_dict(state.server.server_under_test)
    run_config = state.run_config
    properties = {
        "server_url": identity.base_url, "server_version": identity.version, "model": identity.model_path,
        "tokenizer_length": identity.tokenizer_length, "vocab_size": identity.vocab_size, "cuda_graph": identity.cuda_graph,
        "speculative_algorithm": spec.speculative_algorithm, "speculative_num_steps": spec.speculative_num_steps,
        "speculative_eagle_topk": spec.speculative_eagle_topk, "speculative_num_draft_tokens": spec.speculative_num_draft_tokens,
        "speculative_use_rejection_sampling": spec.speculative_use_rejection_sampling,
        "embedded_reference": under_test.embedded_reference, "reference_emulation": under_test.reference_emulation,
        "arm": state.server.arm, "build_hash": run_config.history.build_hash, "accelerator": run_config.history.accelerator,
        "config_key": history.config_key, "profile": run_config.profile, "seed": run_config.seed,
        "results_run_id": state.run_dir.run_id if state.run_dir else None,
        "results_path": str(state.run_dir.results_path) if state.run_dir else None,
        "history_baseline_run": history.baseline.run.id if history.baseline else None,
        "history_baseline_build": history.baseline.run.label if history.baseline else None,
    }
    return {f"specsuite.{name}": value for name, value in properties.items() if value is not None}


@pytest.fixture(scope="session", autouse=True)
def _history_junit_properties(pytestconfig: pytest.Config, record_testsuite_property: Any) -> None:
    """Label the JUnit XML's <testsuite> with the server identity (a no-op without --junit-xml or a server)."""
    history = pytestconfig.stash.get(HISTORY_KEY, None)
    if history is None:
        return
    for name, value in identity_properties(specsuite_state(pytestconfig), history).items():
        record_testsuite_property(name, value)


def _say(session: pytest.Session, history: HistoryState, line: str) -> None:
    if session.config.pluginmanager.get_plugin("terminalreporter") is None:
        print(line, file=sys.stderr)
    else:
        history.summary.append(line)


@pytest.hookimpl(trylast=True)  # after the specsuite plugin wrote the final results.json
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = specsuite_state(session.config)
    history = session.config.stash.get(HISTORY_KEY, None)
    settings = state.run_config.history
    url = settings.results_db
    if not url or history is None or state.server is None or state.run_dir is None:
        return
    outcome = STORED_EXIT_CODES.get(int(exitstatus))
    if outcome is None:
        _say(session, history, f"specsuite: history: not stored (pytest exit {int(exitstatus)}: the checks did not all run)")
        return
    try:
        items = items_from_file(state.run_dir.results_path, arms=[state.server.arm], outcome=outcome,
                                build_hash=settings.build_hash, accelerator=settings.accelerator)
        with HistoryStore.open(url) as store:
            for item in items:
                stored = store.add(item)
                _say(session, history, f"specsuite: history: stored as run {stored.id} ({outcome}, {len(item.metrics)} metrics, "
                                       f"config {item.run.config_key}) in {store.url}")
    except SpecsuiteError as exc:
        _say(session, history, f"specsuite: error: history not stored: {exc}")


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    history = config.stash.get(HISTORY_KEY, None)
    if history is not None and history.summary:
        terminalreporter.write_sep("-", "specsuite history")
        for line in history.summary:
            terminalreporter.write_line(line)
