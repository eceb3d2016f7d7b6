"""The vLLM job's judge (.ci/vllm_outcomes.py): passes only when every failure is a documented
finding and every finding still fires; also checks docs/findings/vllm_known_failures.json names
tests that exist."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from tests.helpers.junit_files import junit_file

ROOT = Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location("vllm_outcomes", ROOT / ".ci" / "vllm_outcomes.py")
outcomes_module = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(outcomes_module)
KNOWN = json.loads((ROOT / "docs" / "findings" / "vllm_known_failures.json").read_text())
PADDED = "suites/test_correctness.py::test_padded_row_ids_within_model_mass[t=1-top_p=0.95]"


def test_known_failures_only_pass(tmp_path):
    results = outcomes_module.outcomes(junit_file(tmp_path, {PADDED: "failed", "suites/test_integrity.py::test_max_new_tokens_sweep[prompt0]": "passed"}))
    assert outcomes_module.judge(results, KNOWN) == []


def test_an_unexplained_failure_fails(tmp_path):
    results = outcomes_module.outcomes(junit_file(tmp_path, {PADDED: "failed", "suites/test_integrity.py::test_max_new_tokens_sweep[prompt0]": "failed"}))
    assert any("unexplained failure" in p and "max_new_tokens_sweep" in p for p in outcomes_module.judge(results, KNOWN))


def test_a_finding_that_stops_firing_fails(tmp_path):
    results = outcomes_module.outcomes(junit_file(tmp_path, {PADDED: "passed"}))
    assert any("no longer fires" in p for p in outcomes_module.judge(results, KNOWN))


def test_no_test_or_an_error_fails(tmp_path):
    assert "no test ran" in outcomes_module.judge(outcomes_module.outcomes(junit_file(tmp_path, {PADDED: "skipped"})), KNOWN)
    results = outcomes_module.outcomes(junit_file(tmp_path, {PADDED: "failed", "suites/test_gsm8k.py::test_gsm8k_accuracy[t=0]": "error"}))
    assert any(p.startswith("error:") for p in outcomes_module.judge(results, KNOWN))


ACTIVE = "(EngineCore_DP0 pid=9) specsuite-vllm-patch active: expand_fix (float check passed)\n"


def test_corrected_run_needs_zero_failures_and_the_activation_line(tmp_path, capsys):
    log = tmp_path / "vllm-eagle-18163.log"
    log.write_text("=== specsuite: starting python -m vllm...\n" + ACTIVE)
    xml = junit_file(tmp_path, {PADDED: "passed", "suites/test_lossless.py::test_greedy_equality": "passed"})
    assert outcomes_module.main(["--corrected", str(log), str(xml)]) == 0
    assert "2 passed, 0 failed" in capsys.readouterr().out
    # A known finding is no excuse here: any failure fails the corrected run.
    xml = junit_file(tmp_path, {PADDED: "failed"})
    assert outcomes_module.main(["--corrected", str(log), str(xml)]) == 1
    assert f"failed: {PADDED}" in capsys.readouterr().err
    # All passed, but the server never said the patch was active: not a corrected run.
    log.write_text("=== specsuite: starting python -m vllm...\nINFO ready\n")
    xml = junit_file(tmp_path, {PADDED: "passed"})
    assert outcomes_module.main(["--corrected", str(log), str(xml)]) == 1
    assert "not a corrected run" in capsys.readouterr().err
    assert outcomes_module.main(["--corrected", str(tmp_path / "none.log"), str(xml)]) == 1
    assert outcomes_module.main(["--corrected", str(log)]) == 2
