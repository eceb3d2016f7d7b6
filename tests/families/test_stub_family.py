"""Adding a workload family is one folder and one registry line: the stub family (tests/helpers/stub_family/, 5 files:
its options and settings, driver, records and entry) is registered by `register(FAMILY)` below, and with no file of
the generic layers changed it gets

- its option in the one option table, and its settings section in RunConfig;
- its workload driver built by the RunSession, which runs it against real reference servers over HTTP (the recycled
  draft_probs arm, whose sampler falls back to the last vocabulary row at T > 0, and the fixed arm);
- its metric compared by the A/B analysis, its verdict line and report section rendered;
- its nightly rule in `--profile nightly`'s gate, which fails the run on the arm with fallback answers;
- its pytest marker.

The generic layers name no stub: the last test greps them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from specsuite.analysis.fail_on import evaluate_fail_on, with_nightly_gate
from specsuite.analysis.verdicts import compare_arms
from specsuite.families.registry import registered
from specsuite.pytest_plugin import plugin
from specsuite.reports.render import render_report
from specsuite.results.builder import measured_arm, session_document
from specsuite.results.types import ANALYSIS_KEY, Document, Workloads
from specsuite.server.session import ServerOptions
from specsuite.session.config import RunConfig
from specsuite.session.option_table import find_option
from specsuite.session.run_session import RunSession
from tests.helpers.stub_family.family import FAMILY
from tests.helpers.stub_family.records import FallbackTally

ROOT = Path(__file__).resolve().parents[2]
GENERIC_LAYERS = ("specsuite", "suites")


@pytest.fixture
def stub_family() -> Iterator[None]:
    with registered(FAMILY):  # the one registry line a new family needs (a built-in one: its entry in registry.py)
        yield


def _arm_document(arm: str, results_dir: Path) -> Document:
    """One reference-server arm, launched by the session, with the stub workload run through the session's driver."""
    config = RunConfig(results_dir=str(results_dir), server=ServerOptions(reference_arm=arm))
    session = RunSession(config)
    server = session.start()
    try:
        tally = session.driver(FAMILY.name).run()
        assert tally == FallbackTally.from_dict(session.workloads["stub"]) and tally.answers == config.stub.answers
        return session_document(status="complete", server_under_test=server.server_under_test, seed=config.seed, command="stub",
                                arms={arm: measured_arm(server, [], Workloads.from_dict(dict(session.workloads)), config.seed)})
    finally:
        session.close()


def test_the_stub_family_gets_an_option_and_a_settings_section(stub_family: None) -> None:
    assert find_option("--stub-answers").default == 12
    assert RunConfig().stub.answers == 12


def test_the_stub_family_runs_on_real_servers_and_is_judged_reported_and_gated(stub_family: None, tmp_path: Path) -> None:
    nofix, fix = (_arm_document(arm, tmp_path / arm) for arm in ("nofix", "fix"))
    document = Document.from_dict({**fix.to_dict(), "arms": {**nofix.to_dict()["arms"], **fix.to_dict()["arms"]}})
    analysis = compare_arms(document)
    rows = {row.metric: row for row in analysis.comparisons if row.candidate == "nofix"}
    assert rows["stub_fallback_answers"].verdict == "worse", rows["stub_fallback_answers"]
    assert FallbackTally.from_dict(fix.arms["fix"].repeats[0].workloads.part("stub")).with_fallback == 0
    document.put(ANALYSIS_KEY, analysis)
    render_report(document, tmp_path / "report")
    markdown = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    assert "## Fallback answers" in markdown and "stub family: **worse** on answers with the fallback id" in markdown
    assert "stub_fallback_answers:worse" in with_nightly_gate(None, "nightly")
    gate = evaluate_fail_on(with_nightly_gate(None, "nightly"), analysis)
    assert gate.failed and any(trigger.rule == "stub_fallback_answers:worse" for trigger in gate.triggered), gate.to_dict()


def test_the_stub_family_brings_its_pytest_marker(stub_family: None) -> None:
    assert ("stub", "the stub family's check") in plugin.registered_markers()


def test_no_generic_file_names_the_stub_family() -> None:
    named = [str(path.relative_to(ROOT)) for layer in GENERIC_LAYERS for path in (ROOT / layer).rglob("*.py")
             if "stub_family" in path.read_text(encoding="utf-8") or "FallbackTally" in path.read_text(encoding="utf-8")]
    assert not named
