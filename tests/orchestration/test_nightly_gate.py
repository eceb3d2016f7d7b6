"""The nightly owner's gate: `specsuite run --profile nightly` against one server exits 1 when that server breaks an
absolute correctness rule, with or without a baseline; a one-server run's arm is "candidate", never "(baseline)"; the
demo's wording appears only in the demo; `--fail-on` rules with no comparison say so in one line.

The sessions are replaced by a stand-in that merges a recorded main-job arm (tests/data/ab_results), so these tests
run the real `command_run` (gates, summary.md, exit code) without starting a server."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from specsuite.analysis.absolute import judge_absolute, rules
from specsuite.cli.main import main
from specsuite.orchestration import runner
from specsuite.results.types import Arm, Document

MAIN_JOB = Path(__file__).parents[1] / "data" / "ab_results" / "main_job_smoke.json.gz"


@pytest.fixture(scope="module")
def recorded() -> dict[str, Any]:
    return json.loads(gzip.decompress(MAIN_JOB.read_bytes()))


def _fake_sessions(monkeypatch: pytest.MonkeyPatch, arms: dict[str, dict[str, Any]]) -> None:
    """Each arm of the run measures as the recorded arm of the same role would (its data merged under its name)."""

    def run_sessions(plan, run_dir, on_progress, merged):
        for spec in plan.arms:
            merged.arms[spec.name] = Arm.from_dict(copy.deepcopy(arms[spec.name]))
        return merged

    monkeypatch.setattr(runner, "run_sessions", run_sessions)


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["run", "--results-dir", str(tmp_path), "--run-id", "r", "--no-report", *argv])
    out = "".join(capsys.readouterr())
    return code, out, (tmp_path / "r" / "summary.md").read_text(encoding="utf-8")


def test_one_broken_server_fails_the_nightly(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                             recorded: dict[str, Any]) -> None:
    """Before: exit 0 with 227 invalid ids printed, and eight lines 'fail-on ...: no ... comparison'."""
    _fake_sessions(monkeypatch, {"candidate": recorded["arms"]["nofix"]})
    code, out, summary = _run(tmp_path, capsys, "--profile", "nightly", "--server-url", "http://127.0.0.1:9")
    assert code == 1, out
    assert "absolute gate: candidate: fallback_ids" in out and "absolute gate: candidate: fallback_ids" in summary
    assert out.rstrip().splitlines()[-1].startswith("specsuite: exit 1: absolute fallback_ids (candidate) fired")
    # the rules that need a comparison: one line, naming the absolute rules that judged instead
    no_comparison = [line for line in out.splitlines() if "nothing to compare" in line]
    assert len(no_comparison) == 1 and all(rule in no_comparison[0] for rule in rules()), no_comparison
    assert "(baseline)" not in out and "(baseline)" not in summary
    assert "**candidate** · correctness:" in summary and "the demo's" not in out and "the demo's" not in summary


def test_one_correct_server_passes_the_nightly(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                               recorded: dict[str, Any]) -> None:
    _fake_sessions(monkeypatch, {"candidate": recorded["arms"]["fix"]})
    code, out, summary = _run(tmp_path, capsys, "--profile", "nightly", "--server-url", "http://127.0.0.1:9")
    assert code == 0, out
    assert "absolute gate:" not in out and "Exit policy: exit 0: no absolute correctness rule broken" in summary


def test_a_broken_baseline_does_not_excuse_a_broken_candidate(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch, recorded: dict[str, Any]) -> None:
    """Both arms broken alike: no comparison is worse, the absolute rules still fail the candidate."""
    _fake_sessions(monkeypatch, {"candidate": recorded["arms"]["nofix"], "baseline": recorded["arms"]["nofix"]})
    code, out, _ = _run(tmp_path, capsys, "--profile", "nightly", "-m", "correctness", "--server-url", "http://127.0.0.1:9",
                        "--baseline-url", "http://127.0.0.1:10")
    assert code == 1, out
    assert "absolute gate: candidate: fallback_ids" in out and "absolute gate: baseline" not in out


def test_the_demo_wording_only_in_the_demo(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                           recorded: dict[str, Any]) -> None:
    _fake_sessions(monkeypatch, {"candidate": recorded["arms"]["nofix"]})
    code, out, summary = _run(tmp_path, capsys, "--server-url", "http://127.0.0.1:9")
    assert code == 0 and "the demo's" not in out and "the demo's" not in summary  # a smoke run against a server is not the demo
    _fake_sessions(monkeypatch, {"nofix": recorded["arms"]["nofix"], "fix": recorded["arms"]["fix"]})
    code, out, summary = main(["run", "--results-dir", str(tmp_path), "--run-id", "demo", "--no-report"]), "", ""
    out = "".join(capsys.readouterr())
    assert code == 0 and "the demo's nofix arm is meant to be worse" in out


def test_test_verdicts_gate_through_the_sessions_junit(recorded: dict[str, Any]) -> None:
    """Padded rows, lossless, integrity and GSM8K's floor are the suites' verdicts, read from each session's JUnit."""
    arm = copy.deepcopy(recorded["arms"]["fix"])
    results = {"arm_order": ["candidate"], "baseline_arm": "candidate", "arms": {"candidate": arm}}
    assert not judge_absolute(Document.from_dict(results)).failed
    failures = [("test_correctness", "test_padded_row_ids_within_model_mass"), ("test_lossless", "test_two_sample_homogeneity"),
                ("test_integrity", "test_every_answer_in_the_session_passed_integrity"), ("test_gsm8k", "test_gsm8k_accuracy")]
    arm["repeats"][0]["tests"] = {"passed": 3, "skipped": 0, "failed": [
        {"test": f"{m}::{f}[x]", "module": m, "function": f, "kind": "failed", "message": "why"} for m, f in failures]}
    assert {f.rule for f in judge_absolute(Document.from_dict(results)).findings} == {"padded_rows", "lossless", "integrity", "gsm8k_floor"}
    # a statistical test against the same server's T=0 control is not an absolute rule
    arm["repeats"][0]["tests"]["failed"] = [{"test": "test_correctness::test_stray_rate_not_above_greedy_control[t=1]",
                                             "module": "test_correctness", "function": "test_stray_rate_not_above_greedy_control"}]
    assert not judge_absolute(Document.from_dict(results)).failed


def test_out_of_range_ids_fail_and_fallback_needs_padded_rows(recorded: dict[str, Any]) -> None:
    arm = copy.deepcopy(recorded["arms"]["fix"])
    results = {"arm_order": ["candidate"], "arms": {"candidate": arm}}
    case = arm["repeats"][0]["cases"][-1]
    case["detectors"]["invalid_id"]["count"] = 3  # none of them padded rows: ids >= vocab_size
    assert [f.rule for f in judge_absolute(Document.from_dict(results)).findings] == ["out_of_range_ids"]
    case["detectors"]["invalid_id"]["count"] = 0
    case["detectors"]["fallback_id"]["count"] = 2
    assert [f.rule for f in judge_absolute(Document.from_dict(results)).findings] == ["fallback_ids"]
    arm["vocab"]["padded_row_count"] = 0  # vocab_size-1 is then a real token
    assert not judge_absolute(Document.from_dict(results)).failed


def test_the_gate_counts_sampled_ids_against_the_sampled_tokens_as_the_report_does(recorded: dict[str, Any]) -> None:
    """The same fallback ids were once counted "in 59,680 tokens" by the gate and "in 42,881 sampled tokens" by the
    correctness line: ids found only at T > 0 are now counted against the sampled tokens in both places."""
    arm = Arm.from_dict(copy.deepcopy(recorded["arms"]["nofix"]))
    results = Document.from_dict({"arm_order": ["candidate"], "arms": {"candidate": copy.deepcopy(recorded["arms"]["nofix"])}})
    [finding] = [f for f in judge_absolute(results).findings if f.rule == "fallback_ids"]
    cases = arm.cases()
    sampled = sum(int(case.n_tokens or 0) for case in cases if float(case.temperature or 0) > 0)
    every = sum(int(case.n_tokens or 0) for case in cases)
    assert sampled < every
    assert f"in {sampled:,} sampled tokens" in finding.reason, finding.reason


def test_the_verdict_lines_name_what_the_absolute_gate_failed(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch, recorded: dict[str, Any]) -> None:
    """A one-server nightly's correctness line gives counts only; the verdict section must also say the gate failed."""
    _fake_sessions(monkeypatch, {"candidate": recorded["arms"]["nofix"]})
    code, out, summary = _run(tmp_path, capsys, "--profile", "nightly", "--server-url", "http://127.0.0.1:9")
    assert code == 1
    line = "candidate · absolute gate: fails fallback_ids"
    assert any(row.startswith(f"specsuite: verdict: {line}") for row in out.splitlines()), out
    verdict_section = summary.split("## Verdict", 1)[1].split("## Gate", 1)[0]
    assert "- **candidate** · absolute gate: fails fallback_ids" in verdict_section, verdict_section
