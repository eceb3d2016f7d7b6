"""`specsuite run` as a CI owner reads it: a session that tested nothing says its own reason (not
"server unreachable"), a run that reached no server writes no report, the verdict lines end the
terminal output and open summary.md, and `--profile nightly` fails a worse or suspect correctness verdict."""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from specsuite.analysis.fail_on import evaluate_fail_on, nightly_fail_on, with_nightly_gate
from specsuite.analysis.verdicts import compare_arms
from specsuite.cli.main import main
from specsuite.cli.run import exit_policy_line
from specsuite.orchestration.runner import _outcome, session_reason
from specsuite.reports.document import ANALYSIS_KEY
from specsuite.reports.summary import summary_document
from specsuite.results.types import Comparison, Document

MAIN_JOB = Path(__file__).parents[1] / "data" / "ab_results" / "main_job_smoke.json.gz"
BAD_TEMPERATURE = "--gsm8k-temperatures: a temperature must be >= 0, got '-1'"


@pytest.fixture(scope="module")
def main_job() -> dict:
    results = json.loads(gzip.decompress(MAIN_JOB.read_bytes()))
    results[ANALYSIS_KEY] = compare_arms(Document.from_dict(results)).to_dict()  # as results.json holds it
    return results


def test_a_sessions_usage_error_is_its_reason(tmp_path: Path) -> None:
    log = tmp_path / "nofix-r1.log"
    log.write_text(f"some noise\nERROR: specsuite: {BAD_TEMPERATURE}\n\n", encoding="utf-8")
    assert session_reason(log) == BAD_TEMPERATURE
    shown = _outcome(4, session_reason(log))
    assert "unreachable" not in shown and shown.endswith(BAD_TEMPERATURE)
    assert session_reason(tmp_path / "missing.log") is None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_bad_suite_option_is_one_line_before_any_session(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: four sessions each started, failed, and the run printed "server unreachable" four times and a report."""
    code = main(["run", "-m", "correctness", "--results-dir", str(tmp_path), "--run-id", "r", "--pytest-arg=--gsm8k-temperatures=-1"])
    out = "".join(capsys.readouterr())
    assert code == 2, out
    assert f"specsuite: error: {BAD_TEMPERATURE}" in out and "unreachable" not in out and "running" not in out
    assert not (tmp_path / "r").exists()  # nothing started, nothing written


@pytest.mark.slow
def test_a_reachable_non_llm_server_is_named_as_such(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(tmp_path)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        code = main(["run", "-m", "correctness", "--results-dir", str(tmp_path), "--run-id", "r", "--server-url", url, "--baseline-url", url])
        out = "".join(capsys.readouterr())
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert code == 2, out
    assert "does not look like an SGLang or vLLM server" in out and "unreachable" not in out
    assert "| arm | case |" not in out  # no empty table
    assert not (tmp_path / "r" / "report").exists()
    summary = (tmp_path / "r" / "summary.md").read_text()
    assert summary.startswith("**Run failed before reaching any server**") and "does not look like" in summary
    assert "candidate ?" not in summary


def test_summary_opens_with_the_verdict_lines(main_job: dict) -> None:
    args = argparse.Namespace(profile="smoke", fail_on=None)
    summary = summary_document(Document.from_dict(main_job), exit_policy_line(args, None))
    first_lines = summary.split("| arm | case |")[0]
    assert summary.startswith("**Server under test: the embedded reference emulation**")
    assert "## Verdict" in first_lines and "**worse** on accuracy −" in first_lines and "**suspect** on acceptance" in first_lines
    assert "median ITL" in first_lines  # the bench rows too
    assert "synthetic" in first_lines and "--gsm8k-path hf|FILE" in first_lines
    assert "Exit policy: exit 0" in first_lines and "--profile nightly" in first_lines


def test_nightly_fails_a_worse_or_suspect_correctness_verdict_without_fail_on(main_job: dict) -> None:
    assert with_nightly_gate(None, "smoke") is None
    assert with_nightly_gate(None, "nightly") == nightly_fail_on()
    outcome = evaluate_fail_on(with_nightly_gate(None, "nightly"), Comparison.from_dict(main_job[ANALYSIS_KEY]))
    fired = {trigger.rule for trigger in outcome.triggered}
    assert outcome.failed and {"invalid_ids:worse", "accept_length:suspect", "gsm8k_accuracy:worse"} <= fired
    assert not any(rule.startswith(("itl_median", "output_throughput")) for rule in fired)  # speed does not gate the nightly
    line = exit_policy_line(argparse.Namespace(profile="nightly", fail_on=None), outcome)
    assert line.startswith("exit 1: ") and "invalid_ids:worse" in line


def test_nightly_passes_two_correct_arms(main_job: dict) -> None:
    same = copy.deepcopy(main_job)
    same["arms"] = {"candidate": copy.deepcopy(main_job["arms"]["fix"]), "fix": main_job["arms"]["fix"]}
    same["arm_order"] = ["candidate", "fix"]
    analysis = compare_arms(Document.from_dict(same))
    same[ANALYSIS_KEY] = analysis.to_dict()
    outcome = evaluate_fail_on(nightly_fail_on(), analysis)
    assert not outcome.failed, outcome.triggered
    assert exit_policy_line(argparse.Namespace(profile="nightly", fail_on=None), outcome).startswith("exit 0")


def test_a_session_that_wrote_null_cases_and_workloads_still_merges(tmp_path: Path) -> None:
    """The merger reads each session's results.json through the typed model; nulls where lists and dicts belong
    (a hand-edited or truncated writer) merge as empty, not as a crash of the whole run."""
    from specsuite.orchestration.arms import ArmSpec
    from specsuite.orchestration.runner import _combine, _session_entry

    for part in ("a", "b"):
        (tmp_path / part).mkdir()
        (tmp_path / part / "results.json").write_text(json.dumps({
            "schema_version": 3, "status": "complete", "warnings": None,
            "arms": {"fix": {"repeats": [{"repeat": 1, "seed": 0, "cases": None, "workloads": None}]}}}))
    arm = ArmSpec(name="fix", url="http://127.0.0.1:1")
    entries = [_session_entry(tmp_path / part, arm, 1, 0, 0, tmp_path / part / "log") for part in ("a", "b")]
    merged = _combine(entries).repeats[0].to_dict()
    assert merged["cases"] == [] and merged["workloads"] == {} and merged["exit_code"] == 0


def test_a_session_stopped_by_the_fault_policy_gives_its_reason(tmp_path: Path) -> None:
    """Before: such a session's reason was lost ("sessions without results: candidate r1: pytest exit 2")."""
    log = tmp_path / "candidate-r1.log"
    log.write_text("..F\n! Interrupted: specsuite fault policy stopped the run: 3 connection failures in a row (last timeout: "
                   "POST /generate on http://h:1 timed out: no response within 6 s) !\n", encoding="utf-8")
    assert session_reason(log) == ("specsuite fault policy stopped the run: 3 connection failures in a row (last timeout: "
                                   "POST /generate on http://h:1 timed out: no response within 6 s)")
