"""Arms in sequence or side by side: `--arm-schedule`, by default one arm at a time for servers you give (fair timing)
and side by side for the embedded demo; per-arm environment in `--arm`; the side-by-side caveat wherever a timing
verdict is printed (terminal, summary.md, report)."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

import pytest

from specsuite.analysis.verdicts import compare_arms
from specsuite.cli.main import main
from specsuite.errors import SpecsuiteError
from specsuite.orchestration import runner
from specsuite.orchestration.arms import ArmSpec, parse_arm
from specsuite.reports.document import ANALYSIS_KEY
from specsuite.reports.overview import SIDE_BY_SIDE_NOTE
from specsuite.reports.summary import run_verdict_lines, summary_document
from specsuite.results.types import Document

MAIN_JOB = Path(__file__).parents[1] / "data" / "ab_results" / "main_job_smoke.json.gz"


def test_leading_assignments_are_the_arms_environment() -> None:
    arm = parse_arm('fix=CUDA_VISIBLE_DEVICES=1 HIP_VISIBLE_DEVICES="2, 3" python -m sglang.launch_server --port 30001')
    assert arm.env == (("CUDA_VISIBLE_DEVICES", "1"), ("HIP_VISIBLE_DEVICES", "2, 3"))
    assert arm.launch == "python -m sglang.launch_server --port 30001"
    assert parse_arm("fix=python -m specsuite.refserver --arm fix").env == ()
    with pytest.raises(SpecsuiteError, match="no command after its variables"):
        parse_arm("fix=CUDA_VISIBLE_DEVICES=1")


def test_each_session_gets_its_arms_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict[str, str]] = []

    class NoProcess:
        def __init__(self, command: list[str], **options: object) -> None:
            seen.append(dict(options["env"]))  # type: ignore[arg-type]

    monkeypatch.setattr(runner.subprocess, "Popen", NoProcess)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    arms = [parse_arm("a=CUDA_VISIBLE_DEVICES=0 python -m x"), parse_arm("b=CUDA_VISIBLE_DEVICES=1 python -m x")]
    plan = runner.RunPlan(arms=arms, repeats=1, seed=0, markers="correctness", pytest_options=[])
    for arm in arms:
        runner._start(plan, runner.SessionSpec(arm, 1, "correctness"), tmp_path, tmp_path)
    assert [env["CUDA_VISIBLE_DEVICES"] for env in seen] == ["0", "1"]


def _planned(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *argv: str) -> runner.RunPlan:
    plans: list[runner.RunPlan] = []

    def run_sessions(plan, run_dir, on_progress, merged):
        plans.append(plan)
        raise KeyboardInterrupt  # the plan is all this test needs

    monkeypatch.setattr(runner, "run_sessions", run_sessions)
    main(["run", "--results-dir", str(tmp_path), "--run-id", f"r{len(list(tmp_path.iterdir()))}", "--no-report", *argv])
    return plans[0]


def test_the_default_schedule(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Servers you give run one at a time (before: always side by side); the embedded demo's arms side by side."""
    given = ("--server-url", "http://127.0.0.1:9", "--baseline-url", "http://127.0.0.1:10")
    assert not _planned(monkeypatch, tmp_path, *given).side_by_side
    assert _planned(monkeypatch, tmp_path, *given, "--arm-schedule", "side-by-side").side_by_side
    assert _planned(monkeypatch, tmp_path).side_by_side
    assert not _planned(monkeypatch, tmp_path, "--arm-schedule", "sequential").side_by_side


def test_a_sequential_round_is_not_side_by_side(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reference arm's parts at once are one arm: the run is side by side only when two arms share a round."""
    monkeypatch.setattr(runner, "_run_round", lambda running, *args: args[-2] + len(running))
    monkeypatch.setattr(runner, "_start", lambda plan, spec, sessions_dir, config_dir: None)
    arms = [ArmSpec("nofix", launch="x", reference_args=("nofix", ())), ArmSpec("fix", launch="y", reference_args=("fix", ()))]
    for together in (False, True):
        merged = Document.from_dict({"arms": {}})
        plan = runner.RunPlan(arms=arms, repeats=1, seed=0, markers="m", pytest_options=[], side_by_side=together, parts=("a", "b"))
        runner.run_sessions(plan, runner.RunDirectory(tmp_path, run_id=f"s{together}"), lambda line: None, merged)
        assert merged.side_by_side is together


def test_the_caveat_goes_with_every_timing_verdict() -> None:
    results = json.loads(gzip.decompress(MAIN_JOB.read_bytes()))
    results["side_by_side"] = True
    results[ANALYSIS_KEY] = compare_arms(Document.from_dict(results)).to_dict()
    lines = run_verdict_lines(Document.from_dict(results))  # what the terminal prints and summary.md opens with
    assert any("serving benchmark" in line for line in lines) and SIDE_BY_SIDE_NOTE in lines
    assert SIDE_BY_SIDE_NOTE in summary_document(Document.from_dict(results), "exit 0")
    alone = copy.deepcopy(results)
    alone["side_by_side"] = False
    assert SIDE_BY_SIDE_NOTE not in run_verdict_lines(Document.from_dict(alone))
