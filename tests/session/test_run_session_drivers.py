"""The RunSession builds every registered family's workload driver from the registry, names none itself: a family
registered later gets its driver built, told when the server started, its warnings collected and closed, with no change
to the session; the built-in families' drivers are reached by name, and a family without one is one line."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from specsuite.errors import SpecsuiteError
from specsuite.families import registry
from specsuite.families.workload_driver import WorkloadDriver
from specsuite.families.workload_family import WorkloadFamily
from specsuite.pytest_plugin import plugin
from specsuite.session import run_session
from specsuite.session.config import RunConfig


class _Recording(WorkloadDriver):
    def __init__(self, session) -> None:
        super().__init__(session)
        self.calls: list[str] = []

    def started(self) -> None:
        self.calls.append("started")

    def warnings(self) -> list[str]:
        return ["late family: one warning"]

    def close(self) -> None:
        self.calls.append("closed")


@pytest.fixture
def late_family():
    family = registry.register(WorkloadFamily(name="late", label="late", results_key="workloads.late", suite_module="test_late",
                                              records=lambda repeat: [], metrics=(), verdict_rules=(), state=lambda view, arm: "",
                                              driver=_Recording))
    yield family
    registry.unregister(family.name)


def test_a_registered_familys_driver_is_built_started_heard_and_closed(tmp_path: Path, late_family, monkeypatch) -> None:
    server = SimpleNamespace(arm="fix", launched=None, close=lambda: None)
    monkeypatch.setattr(run_session, "start_server", lambda options, log_dir, **_: SimpleNamespace(stop=lambda: None))
    monkeypatch.setattr(run_session, "identify_server", lambda endpoint, options: server)
    monkeypatch.setattr(registry.family("cases").driver, "started", lambda self: None)  # no prompts file needed here
    session = run_session.RunSession(RunConfig(results_dir=str(tmp_path)))
    assert list(session.drivers) == [family.name for family in registry.families() if family.driver is not None]
    driver = session.driver("late")
    session.start()
    assert driver.calls == ["started"] and session.warnings()[-1] == "late family: one warning"
    session.close()
    assert driver.calls == ["started", "closed"]


def test_a_family_without_a_driver_is_one_line(tmp_path: Path) -> None:
    session = run_session.RunSession(RunConfig(results_dir=str(tmp_path)))
    assert {"cases", "gsm8k", "bench"} <= set(session.drivers)
    with pytest.raises(SpecsuiteError, match="workload family 'lossless' has no driver; drivers: cases, gsm8k, bench"):
        session.driver("lossless")


def test_the_pytest_markers_and_fixture_modules_come_from_the_registry() -> None:
    for family in registry.families():
        if family.marker is not None:
            assert f"{family.marker[0]}: {family.marker[1]}" in plugin.markers()
        if family.pytest_plugin is not None:
            assert family.pytest_plugin in plugin.pytest_plugins
    assert {line.split(":")[0] for line in plugin.markers()} == {
        "correctness", "gsm8k", "perf", "lossless", "integrity", "greedy_equality", "ab", "kernel"}
