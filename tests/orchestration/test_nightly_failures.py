"""Nothing that failed is silent: under `specsuite run --profile nightly` a failed test, requests the server failed and
requests the harness gave up waiting for make the run exit 1, and each appears with its reason in the terminal,
summary.md and report.md; a timeout's line names the harness's timeout and the load, a server failure's its classes.

Before: the nightly of a server that timed out 9 of 96 requests printed "some checks failed", then "exit 0: no absolute
correctness rule broken", and neither summary.md nor report.md said a word of the timeouts or the failed test.

The sessions are a stand-in merging the recorded fix arm (tests/data/ab_results), changed as a session that met the
failure would have written it, so the real `command_run` (gates, summary.md, report, exit code) runs without a server."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from specsuite.cli.main import main
from specsuite.orchestration import runner
from specsuite.results.types import Arm, Document

MAIN_JOB = Path(__file__).parents[1] / "data" / "ab_results" / "main_job_smoke.json.gz"
TIMED_OUT = "POST /generate on http://127.0.0.1:9 timed out: no response within 3 s"
FAILED_TEST = {"test": "test_correctness::test_requests_succeed[t=0.6-top_p=0.95]", "module": "test_correctness",
               "function": "test_requests_succeed", "kind": "failed",
               "message": f"assert 9 of 33 requests failed at t=0.6-top_p=0.95: {TIMED_OUT}"}


@pytest.fixture(scope="module")
def fix_arm() -> dict[str, Any]:
    return json.loads(gzip.decompress(MAIN_JOB.read_bytes()))["arms"]["fix"]


def _with(arm: dict[str, Any], *, classes: dict[str, int], failed_test: bool = True, load: float = 7.5) -> dict[str, Any]:
    """The arm as a session would have written it had 9 requests of its T=0.6 case failed so (`classes`)."""
    arm = copy.deepcopy(arm)
    repeat = arm["repeats"][0]
    case = next(c for c in repeat["cases"] if c["case_id"] == "t=0.6-top_p=0.95")
    case.update(n_errors=sum(classes.values()), errors=[TIMED_OUT], error_classes=classes)
    repeat["tests"] = {"passed": 40, "skipped": 0, "failed": [FAILED_TEST] if failed_test else []}
    repeat["load_average"] = load
    return arm


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, arm: dict[str, Any],
         *argv: str) -> tuple[int, str, str, str]:
    def run_sessions(plan, run_dir, on_progress, merged):
        for spec in plan.arms:
            merged.arms[spec.name] = Arm.from_dict(copy.deepcopy(arm))
        return merged

    monkeypatch.setattr(runner, "run_sessions", run_sessions)
    code = main(["run", "--results-dir", str(tmp_path), "--run-id", "r", "-m", "correctness", "--server-url", "http://127.0.0.1:9",
                 "--pytest-arg=--request-timeout=3", *argv])
    out = "".join(capsys.readouterr())
    folder = tmp_path / "r"
    return code, out, (folder / "summary.md").read_text(encoding="utf-8"), (folder / "report" / "report.md").read_text(encoding="utf-8")


def test_a_nightly_with_timed_out_requests_and_a_failed_test_is_red_and_says_why(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, fix_arm: dict[str, Any]) -> None:
    code, out, summary, report = _run(tmp_path, capsys, monkeypatch, _with(fix_arm, classes={"timeout": 9}), "--profile", "nightly")
    assert code == 1, out
    gave_up = "the harness gave up waiting on 9 of"
    for text in (out, summary, report):
        assert gave_up in text and "--request-timeout of 3 s" in text and "load average 7.5" in text, text
        assert "test_requests_succeed[t=0.6-top_p=0.95]" in text and "1 test(s) failed" in text, text
        assert "the server failed" not in text  # a timeout is the harness's, not the server's failure
    assert out.rstrip().splitlines()[-1].startswith("specsuite: exit 1: failed checks (candidate) fired"), out


def test_requests_the_server_failed_are_told_apart_from_timeouts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, fix_arm: dict[str, Any]) -> None:
    code, out, summary, _ = _run(tmp_path, capsys, monkeypatch, _with(fix_arm, classes={"http_5xx": 7, "server_abort": 2}, failed_test=False),
                                 "--profile", "nightly")
    assert code == 1, out
    assert "the server failed 9 of" in summary and "(http_5xx 7, server_abort 2) at t=0.6-top_p=0.95" in summary, summary
    assert "gave up waiting" not in out + summary


def test_a_smoke_run_lists_the_failures_and_keeps_its_exit_policy(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, fix_arm: dict[str, Any]) -> None:
    code, out, summary, _ = _run(tmp_path, capsys, monkeypatch, _with(fix_arm, classes={"timeout": 9}))
    assert code == 0, out
    assert "the harness gave up waiting on 9 of" in summary and "verdicts do not set the exit code of a smoke run" in summary


def test_a_clean_arm_has_no_failures(fix_arm: dict[str, Any]) -> None:
    from specsuite.orchestration.failures import run_failures  # here: the other tests run against older code too

    document = Document(arms={"fix": Arm.from_dict(copy.deepcopy(fix_arm))}, arm_order=["fix"])
    assert run_failures(document, 120.0) == []


def test_the_nightly_gates_own_rules_get_a_short_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                                      fix_arm: dict[str, Any]) -> None:
    """Before: with no --fail-on given, a one-server nightly printed every implicit rule ("fail-on: no comparison in these
    results for invalid_ids:worse, fallback_ids:worse, ..."), rules the user never wrote."""
    code, out, summary, _ = _run(tmp_path, capsys, monkeypatch, fix_arm, "--profile", "nightly")
    (line,) = [line for line in out.splitlines() if line.startswith("specsuite: fail-on:")]
    assert code == 0 and "invalid_ids:worse" not in line and "of the nightly gate's comparison rules had nothing to compare" in line, line
    assert "the absolute rules judged candidate instead" in line
