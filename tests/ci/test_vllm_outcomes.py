"""The vLLM job's judge (.ci/vllm_outcomes.py): passes only when every failure is a documented
finding and every finding still fires; also checks docs/findings/vllm_known_failures.json names
tests that exist."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.helpers.junit_files import junit_file

ROOT = Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location("vllm_outcomes", ROOT / ".ci" / "vllm_outcomes.py")
outcomes_module = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(outcomes_module)
KNOWN = json.loads((ROOT / "docs" / "findings" / "vllm_known_failures.json").read_text())
PADDED = "suites/test_correctness.py::test_padded_row_ids_within_model_mass[t=1-top_p=0.95]"
PADDED_06 = "suites/test_correctness.py::test_padded_row_ids_within_model_mass[t=0.6-top_p=0.95]"
NEIGHBOURS = "suites/test_integrity.py::test_greedy_answers_stay_valid_among_sampled_neighbours"
SWEEP = "suites/test_integrity.py::test_max_new_tokens_sweep[prompt0]"


def padded_message(case: str) -> str:
    return (f"AssertionError: token validity: padded-row ids above the model's own rate at {case}: 14 padded-row ids in 2,048 "
            f"tokens vs the speculation-off arm's 0 in 2,048 (exact one-sided conditional binomial p=6.1e-05 < alpha 0.001); "
            f"example: ...\nassert not True")


NEIGHBOURS_MESSAGE = ("AssertionError: 8 of 9 cases broke the rule:\n    - greedy request 0: position 3: 8097 where alone 559 (gap 4.1 "
                      "nats above the tolerance); among neighbours [8097, 198, 8096, 198, 416]\n    - greedy request 1: 2 ids outside "
                      "the tokenizer (8100), first 8101 at 7")
FIRING = {PADDED: padded_message("t=1-top_p=0.95"), PADDED_06: padded_message("t=0.6-top_p=0.95"), NEIGHBOURS: NEIGHBOURS_MESSAGE}


def run_judge(tmp_path, cases: dict[str, str], messages: dict[str, str] | None = None) -> list[str]:
    run = junit_file(tmp_path, cases, messages=FIRING if messages is None else messages)
    return outcomes_module.judge(outcomes_module.outcomes(run), KNOWN, outcomes_module.failure_messages(run))


def test_known_failures_only_pass(tmp_path):
    assert run_judge(tmp_path, {**dict.fromkeys(FIRING, "failed"), SWEEP: "passed"}) == []


def test_an_unexplained_failure_fails(tmp_path):
    problems = run_judge(tmp_path, {**dict.fromkeys(FIRING, "failed"), SWEEP: "failed"}, {**FIRING, SWEEP: "AssertionError: 1 of 9 cases"})
    assert any("unexplained failure" in p and "max_new_tokens_sweep" in p for p in problems)


def test_a_harness_crash_in_a_listed_test_is_unexplained(tmp_path):
    """A KeyError traceback in a test the finding lists is no symptom of the expand bug."""
    problems = run_judge(tmp_path, dict.fromkeys(FIRING, "failed"), {**FIRING, NEIGHBOURS: "KeyError: 'output_ids'"})
    assert any("its message does not match the reason of docs/findings/vllm-spec-padded-ids.md" in p and NEIGHBOURS in p
               and "KeyError" in p for p in problems), problems


def test_a_partial_upstream_fix_names_each_test_that_stopped(tmp_path):
    """The greedy rows come clean (say, a fix of the batch-mixing half) while the sampled padded rows still fire: the
    finding still fires, and the judge names the test that stopped."""
    problems = run_judge(tmp_path, {PADDED: "failed", PADDED_06: "failed", NEIGHBOURS: "passed"})
    assert problems == [f"docs/findings/vllm-spec-padded-ids.md: {NEIGHBOURS} no longer fires (passed): fixed upstream there "
                        "(in part or whole), or the suite went blind there"]
    problems = run_judge(tmp_path, {PADDED: "failed", PADDED_06: "passed", NEIGHBOURS: "failed"})
    assert [p for p in problems if "no longer fires" in p] == [f"docs/findings/vllm-spec-padded-ids.md: {PADDED_06} no longer fires "
                                                              "(passed): fixed upstream there (in part or whole), or the suite went blind there"]


def test_a_finding_that_stops_firing_fails(tmp_path):
    assert any("vllm-spec-padded-ids.md no longer fires (none" in p for p in run_judge(tmp_path, dict.fromkeys(FIRING, "passed")))


def test_no_test_or_an_error_fails(tmp_path):
    assert "no test ran" in run_judge(tmp_path, {PADDED: "skipped"})
    problems = run_judge(tmp_path, {**dict.fromkeys(FIRING, "failed"), "suites/test_gsm8k.py::test_gsm8k_accuracy[t=0]": "error"})
    assert any(p.startswith("error:") for p in problems)


# Per may_fail entry of both findings files: a test id it names and the message that test emits for its finding (the
# suites' f-strings, filled as a failing run fills them), then a message of the same test for another cause.
EMITTED = {
    "vllm_known_failures.json": [
        ("suites/test_correctness.py::test_no_invalid_token_ids[t=1-top_p=0.95]",
         "AssertionError: token validity: ids outside the vocabulary at t=1-top_p=0.95: 3 in 2048 tokens (rate 0.146%, 95% upper "
         "bound 0.428%); example: ...; ids outside the tokenizer 5, of them padded rows 5"),
        (PADDED, padded_message("t=1-top_p=0.95")),
        ("suites/test_correctness.py::test_no_fallback_ids[t=0.6-top_p=1]",
         "AssertionError: token validity: sampler fallback ids at t=0.6-top_p=1: 2 in 2048 tokens (rate 0.098%, 95% upper bound 0.352%)"),
        ("suites/test_correctness.py::test_no_empty_decoding_ids[t=1-top_p=1]",
         "AssertionError: ids that decode to nothing at t=1-top_p=1: 4 in 2048 tokens (rate 0.195%, 95% upper bound 0.5%)"),
        ("suites/test_correctness.py::test_replacement_chars_not_above_greedy_control[t=1-top_p=0.95]",
         "AssertionError: U+FFFD characters at t=1-top_p=0.95: 9 in 2048 tokens (rate 0.439%, 95% upper bound 0.8%); example: ...; "
         "greedy control 0 in 2048; exact rate-ratio test p=1.9e-03 < alpha 0.001"),
        ("suites/test_correctness.py::test_repetition_loops_not_above_greedy_control[t=0.6-top_p=1]",
         "AssertionError: repetition loops at t=0.6-top_p=1: 9 of 16 responses vs greedy control 0 of 16; Fisher p=4.1e-04 < alpha 0.001"),
        ("suites/test_correctness.py::test_stray_rate_not_above_greedy_control[t=1-top_p=1]",
         "AssertionError: stray characters at t=1-top_p=1: 31.0 per 1200 tokens exceeds the cap 12.0"),
        (NEIGHBOURS, NEIGHBOURS_MESSAGE),
        ("suites/test_integrity.py::test_stream_reassembles_with_seeded_sampling[t=1]",
         "AssertionError: 2 of 12 cases broke the rule:\n    - request 3: stream vs non-stream: output_ids differ at 2"),
        ("suites/test_integrity.py::test_seeded_request_same_alone_and_in_batch",
         "AssertionError: 1 of 3 cases broke the rule:\n    - in a native batch: output_ids differ at 2"),
        ("suites/test_lossless.py::test_pit_calibration[t=0.7-top_p=0.9]",
         "AssertionError: not calibrated to the target: PIT at t=0.7-top_p=0.9: p=0 (KS p=1e-12, chi-square p=0) over n=2574 "
         "positions >= 2 from 120 requests; top bin [0.9969, 1] holds 165 vs 8.0 expected"),
        ("suites/test_lossless.py::test_two_sample_homogeneity[t=1-top_p=1]", TWO_SAMPLE_LINE := (
         "AssertionError: token distributions differ from the speculation-off reference: two-sample chi-square at t=1-top_p=1: "
         "smallest Holm-adjusted p=1e-09 at position 3")),
        ("suites/test_lossless.py::test_loglik_calibration[t=1-top_p=1]",
         "AssertionError: target log-likelihood differs from the reference's: log-likelihood calibration at t=1-top_p=1: z=-5.10 "
         "p=3.4e-07, mean shift -2.001 nats per sample (MDE 0.400)"),
        ("suites/test_lossless.py::test_tail_mass_two_sample[t=0.7-top_p=1]", TAIL_MASS_LINE := (
         "AssertionError: the tail's mass differs from the speculation-off reference's: tail mass at t=0.7-top_p=1: -0.412 tail "
         "tokens per sample against the reference's 0.530, z=-6.10 p=1.1e-09")),
        ("suites/test_lossless.py::test_mode_not_overdrawn",
         "AssertionError: the sampler over-draws the target's mode: mode drawn 812 times over 1200 positions where the target expects 640.2"),
        ("suites/test_lossless.py::test_draft_acceptance_calibrated",
         "AssertionError: drafts are accepted more often than p allows (assumes a greedy draft, vLLM's default draft_sample_method): ..."),
        ("suites/test_gsm8k.py::test_gsm8k_answers_hold_no_invalid_ids[t=1]",
         "AssertionError: GSM8K answers at t=1: 3 invalid_id in 5120 tokens (95% upper bound 0.171%)"),
    ],
    "sglang_known_failures.json": [
        ("suites/test_integrity.py::test_different_seeds_give_different_outputs",
         "AssertionError: 3 of 6 cases broke the rule:\n    - seeds 11 and 12 gave the same 64 ids"),
        ("suites/test_lossless.py::test_pit_calibration[t=1-top_p=1]",
         "AssertionError: not calibrated to the target: PIT at t=1-top_p=1: p=1.2e-80 (KS p=3e-40, chi-square p=1.2e-80) over n=4247"),
        ("suites/test_lossless.py::test_two_sample_homogeneity[t=0.7-top_p=0.9]", TWO_SAMPLE_LINE.replace("t=1-top_p=1", "t=0.7-top_p=0.9")),
        ("suites/test_lossless.py::test_loglik_calibration[t=1-top_p=1]",
         "AssertionError: target log-likelihood differs from the reference's: log-likelihood calibration at t=1-top_p=1: z=inf p=0, "
         "mean shift +2.817 nats per sample (MDE 0.412)"),
        ("suites/test_lossless.py::test_tail_mass_two_sample[t=0.7-top_p=1]", TAIL_MASS_LINE),
        ("suites/test_lossless.py::test_mode_not_overdrawn",
         "AssertionError: the sampler over-draws the target's mode: mode drawn 1200 times over 1200 positions where the target expects 640.2"),
    ],
}


@pytest.mark.parametrize("known_file", sorted(EMITTED))
def test_every_reason_matches_the_message_its_test_emits_and_no_crash(known_file):
    known = json.loads((ROOT / "docs" / "findings" / known_file).read_text())
    (finding,) = known["findings"]
    entries = finding["may_fail"]
    for test, message in EMITTED[known_file]:
        assert outcomes_module.explained_by(test, message, finding), (test, message)
        assert not outcomes_module.explained_by(test, "KeyError: 'output_ids'", finding), test
        assert not outcomes_module.explained_by(test, "Failed: lossless setup: the reference refused the request", finding), test
    covered = {next(e["test"] for e in entries if re.fullmatch(e["test"], test)) for test, _ in EMITTED[known_file]}
    assert covered == {e["test"] for e in entries}, "every entry has an example message above"


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


LONG_RUN = '''
import pytest


@pytest.mark.parametrize("temperature", [1.0], ids=["t=1"])
def test_stream_reassembles_with_seeded_sampling(temperature):
    difference = "text differs at character 3: " + "x" * 700  # a difference too long for the JUnit message attribute
    message = ["1 of 12 cases broke the rule:\\n" + f"  - request 3: stream vs non-stream: {difference}"]
    assert not message, "\\n".join(message)


def test_seeded_request_same_alone_and_in_batch():
    answer = {"meta_info": {}}
    assert answer["meta_info"]["output_ids"], "1 of 3 cases broke the rule:\\n  - in a native batch: ..."
'''


def test_a_message_pytest_cut_is_read_from_the_exception_lines(tmp_path):
    """pytest keeps whole lines up to 500 characters in the message attribute: a long failure line is then read from
    the report's "E" lines, never from the quoted source (where a crashing test still shows its assertion message)."""
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "test_integrity.py").write_text(LONG_RUN)
    xml = tmp_path / "run.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:specsuite.pytest_plugin.plugin", "-q",
                    f"--junitxml={xml}", "suites/test_integrity.py"], cwd=tmp_path, capture_output=True, timeout=120, check=False)
    messages = outcomes_module.failure_messages(xml)
    cut = [f.get("message") for f in ET.parse(xml).getroot().iter("failure") if "stream vs" in (f.text or "")]
    assert cut and cut[0].endswith("; full report in element text]") and "stream vs" not in cut[0]  # the attribute lost the line
    stream = "suites/test_integrity.py::test_stream_reassembles_with_seeded_sampling[t=1]"
    batch = "suites/test_integrity.py::test_seeded_request_same_alone_and_in_batch"
    (finding,) = KNOWN["findings"]
    assert outcomes_module.explained_by(stream, messages[stream], finding), messages[stream][:200]
    assert messages[batch].startswith("KeyError: 'output_ids'")
    assert not outcomes_module.explained_by(batch, messages[batch], finding)
