"""`specsuite run`'s runner: the arms of a repeat run side by side, each result is merged as it lands,
seeds are recorded, and the default reference arms get distinct ports."""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pytest

from specsuite.errors import SpecsuiteError
from specsuite.orchestration import runner
from specsuite.orchestration.arms import ArmSpec, free_ports, resolve_arms
from specsuite.results.store import RunDirectory, load_results
from specsuite.results.types import Document
from specsuite.session.main_job_profiles import MAIN

SESSION_S = 1.5
# A stand-in pytest session: waits, then writes the session results.json the runner merges.
FAKE_SESSION = """
import json, sys, time
from pathlib import Path
folder, arm, seconds, markers = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3]), sys.argv[4]
time.sleep(seconds)
folder.mkdir(parents=True, exist_ok=True)
case = {"case_id": "t=0-top_p=1", "temperature": 0.0, "top_p": 1.0, "n_tokens": 100, "detectors": {}}
cases, workloads = ([case], {}) if "correctness" in markers else ([], {"gsm8k": [{"temperature": 0.0}]})
(folder / "results.json").write_text(json.dumps({"schema_version": 1, "status": "complete",
    "arms": {arm: {"cases": cases, "workloads": workloads, "identity": {"version": "x"}}}}))
"""


def _fake_command(plan: runner.RunPlan, session: runner.SessionSpec, sessions_dir: Path, config_dir: Path) -> list[str]:
    return [sys.executable, "-c", FAKE_SESSION, str(sessions_dir / session.run_id), session.arm.name, str(SESSION_S), session.markers]


@pytest.fixture
def fake_sessions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "session_command", _fake_command)


def _run(tmp_path: Path, *, repeats: int, side_by_side: bool = True, arms: list[ArmSpec] | None = None,
         parts: tuple[str, ...] = ()) -> tuple[dict, float, list[str]]:
    arms = arms or [ArmSpec("nofix", launch="x"), ArmSpec("fix", launch="y")]
    plan = runner.RunPlan(arms=arms, repeats=repeats, seed=7, markers="correctness", pytest_options=[], side_by_side=side_by_side,
                          parts=parts)
    run_dir = RunDirectory(tmp_path, run_id="run")
    merged = Document.from_dict({"status": "running", "arms": {}})
    progress: list[str] = []
    started = time.perf_counter()
    runner.run_sessions(plan, run_dir, progress.append, merged)
    return merged.to_dict(), time.perf_counter() - started, progress


def test_the_arms_of_a_repeat_run_side_by_side(tmp_path: Path, fake_sessions: None) -> None:
    merged, wall, progress = _run(tmp_path, repeats=2)
    # Two rounds of two sessions each: about two sessions' time, not four.
    assert wall < 4 * SESSION_S, wall
    assert "side by side" in progress[0]
    assert merged["side_by_side"] is True
    for arm in ("nofix", "fix"):
        repeats = merged["arms"][arm]["repeats"]
        assert [r["repeat"] for r in repeats] == [1, 2]
        assert [r["seed"] for r in repeats] == [7, 8]  # base seed + repeat - 1, recorded
        assert all(r["exit_code"] == 0 and r["cases"] and "running" not in r for r in repeats)
        assert merged["arms"][arm]["identity"] == {"version": "x"}
    assert [(s["arm"], s["repeat"], s["seed"]) for s in merged["sessions"]] == [
        ("nofix", 1, 7), ("fix", 1, 7), ("nofix", 2, 8), ("fix", 2, 8)]
    on_disk = load_results(tmp_path / "run")
    assert set(on_disk.arms) == {"nofix", "fix"}  # written as each session landed


def test_one_at_a_time_when_asked(tmp_path: Path, fake_sessions: None) -> None:
    merged, wall, _ = _run(tmp_path, repeats=1, side_by_side=False)
    assert wall >= 2 * SESSION_S
    assert merged["side_by_side"] is False


def test_the_schedule_keeps_the_interleaved_order() -> None:
    arms = [ArmSpec("a", url="http://a"), ArmSpec("b", url="http://b")]
    plan = runner.RunPlan(arms=arms, repeats=2, seed=0, markers="m", pytest_options=[], parts=MAIN.parts)
    # Arms given by URL are never split into parts: a second session would share their server.
    assert [[(s.repeat, s.arm.name, s.markers) for s in round_] for round_ in plan.rounds()] == [
        [(1, "a", "m"), (1, "b", "m")], [(2, "a", "m"), (2, "b", "m")]]
    assert [(r, a.name) for r, a in plan.schedule()] == [(1, "a"), (1, "b"), (2, "a"), (2, "b")]


def test_reference_arms_run_their_parts_at_once_each_on_its_own_server(tmp_path: Path, fake_sessions: None) -> None:
    arms = resolve_arms(None, None, [], free_ports(2))
    plan = runner.RunPlan(arms=arms, repeats=1, seed=0, markers="m", pytest_options=[], parts=MAIN.parts)
    [round_] = plan.rounds()
    lossless = "lossless and not greedy_equality"
    assert [(s.run_id, s.markers) for s in round_] == [("nofix-r1.1", "correctness"), ("nofix-r1.2", "gsm8k or perf"),
                                                       ("nofix-r1.3", lossless), ("fix-r1.1", "correctness"),
                                                       ("fix-r1.2", "gsm8k or perf"), ("fix-r1.3", lossless)]
    ports = {re.search(r"--port (\d+)", s.arm.launch or "").group(1) for s in round_}
    assert len(ports) == 6  # six servers, six ports
    merged, wall, _ = _run(tmp_path, repeats=1, arms=arms, parts=MAIN.parts)
    assert wall < 3 * SESSION_S, wall
    for arm in ("nofix", "fix"):
        [repeat] = merged["arms"][arm]["repeats"]  # one repeat, joined from its parts
        assert repeat["cases"] and repeat["workloads"]["gsm8k"] and repeat["exit_code"] == 0
        assert [p["markers"] for p in repeat["parts"]] == list(MAIN.parts)


def test_default_reference_arms_get_distinct_ports() -> None:
    ports = free_ports(2)
    assert len(set(ports)) == 2
    arms = resolve_arms(None, None, [], ports)
    assert [arm.name for arm in arms] == ["nofix", "fix"]
    for arm, port in zip(arms, ports, strict=True):
        assert f"--port {port}" in (arm.launch or "")
    assert "--port 31001" in (resolve_arms(None, None, [], 31000)[1].launch or "")  # a base port: arm i on base + i
    with pytest.raises(SpecsuiteError, match="distinct ports"):
        resolve_arms(None, None, [], [31000, 31000])


def test_the_main_job_runs_every_family() -> None:
    assert MAIN.markers == "correctness or gsm8k or perf or (lossless and not greedy_equality)"
    assert (MAIN.gsm8k.path, MAIN.gsm8k.temperatures, MAIN.gsm8k.num_questions) == ("synthetic", (0.0, 1.0), 200)


def test_sessions_do_not_inherit_the_server_url_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A set SPECSUITE_SERVER_URL would beat each session's --launch: the runner leaves it out."""
    seen: dict[str, dict[str, str]] = {}

    class NoProcess:
        def __init__(self, command: list[str], **options: object) -> None:
            seen["env"] = dict(options["env"])  # type: ignore[arg-type]

    monkeypatch.setenv("SPECSUITE_SERVER_URL", "http://elsewhere:30000")
    monkeypatch.setattr(runner.subprocess, "Popen", NoProcess)
    plan = runner.RunPlan(arms=[ArmSpec("fix", launch="true")], repeats=1, seed=0, markers="correctness", pytest_options=[])
    runner._start(plan, runner.SessionSpec(plan.arms[0], 1, "correctness"), tmp_path, tmp_path)
    assert "SPECSUITE_SERVER_URL" not in seen["env"]
    # the session's interpreter first, so that an arm's `python -m ...` runs with it; the rest as inherited
    folder = os.path.dirname(sys.executable)
    assert seen["env"]["PATH"].split(os.pathsep) == [folder, *[p for p in os.environ["PATH"].split(os.pathsep) if p and p != folder]]
