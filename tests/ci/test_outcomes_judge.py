"""The live-server jobs' judge (.ci/outcomes_judge.py) with the SGLang job's findings: it passes only when
every failure is a documented finding and every finding still fires; the findings file names tests that
exist, each pattern matching a test id as pytest writes it."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.junit_files import junit_file

ROOT = Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location("outcomes_judge", ROOT / ".ci" / "outcomes_judge.py")
judge_module = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(judge_module)
KNOWN_PATH = ROOT / "docs" / "findings" / "sglang_known_failures.json"
KNOWN = json.loads(KNOWN_PATH.read_text())
SEEDS = "suites/test_integrity.py::test_different_seeds_give_different_outputs"
TWO_SAMPLE = "suites/test_lossless.py::test_two_sample_homogeneity[t=1-top_p=1]"
GREEDY = "suites/test_lossless.py::test_greedy_equality"
LOGLIK = "suites/test_lossless.py::test_loglik_calibration[t=1-top_p=1]"
# The messages these tests emit for the greedy verify, as pytest writes them in the JUnit message attribute (it indents
# the lines after the first by two more spaces).
SEEDS_MESSAGE = ("AssertionError: 3 of 6 cases broke the rule:\n    - seeds 11 and 12 gave the same 64 ids\n"
                 "  - seeds 11 and 13 gave the same 64 ids\n    - seeds 12 and 13 gave the same 64 ids\nassert not ['3 of 6 ...']")
TWO_SAMPLE_MESSAGE = ("AssertionError: token distributions differ from the speculation-off reference: two-sample chi-square at "
                      "t=1-top_p=1: smallest Holm-adjusted p=2.1e-31 at position 2 (4 prompts x 200 samples per server; MDE of one "
                      "token's probability 0.09)\nassert False")
LOGLIK_MESSAGE = ("AssertionError: target log-likelihood differs from the reference's: log-likelihood calibration at t=1-top_p=1: "
                  "z={z} p=3.3e-12, mean shift {shift} nats per sample (MDE 0.412)\nassert False")
FIRING = {SEEDS: SEEDS_MESSAGE, TWO_SAMPLE: TWO_SAMPLE_MESSAGE}
# A harness crash in the same test: the traceback's last line, as pytest writes it.
CRASH = "KeyError: 'output_ids'"


def run_judge(tmp_path: Path, cases: dict[str, str], messages: dict[str, str] | None = None) -> list[str]:
    run = junit_file(tmp_path, cases, messages=FIRING if messages is None else messages)
    return judge_module.judge(judge_module.outcomes(run), KNOWN, judge_module.failure_messages(run))


def test_the_documented_failures_alone_pass(tmp_path):
    assert run_judge(tmp_path, {SEEDS: "failed", TWO_SAMPLE: "failed", GREEDY: "passed"}) == []


def test_a_harness_crash_in_a_listed_test_is_unexplained(tmp_path):
    """The test id is the finding's, the reason is not: a KeyError in the harness is never excused as the finding."""
    problems = run_judge(tmp_path, {SEEDS: "failed", TWO_SAMPLE: "failed"}, {**FIRING, SEEDS: CRASH})
    assert any("unexplained failure (its message does not match the reason of docs/findings/sglang-cpu-greedy-verify.md" in p
               and SEEDS in p and CRASH in p for p in problems), problems
    # and the crashed test does not count as firing either: it is named as silent for its finding
    assert any(f"{SEEDS} no longer fires (fails for another reason)" in p for p in problems), problems


def test_a_partial_fix_is_named_per_test(tmp_path):
    """One of the two must_fire tests stops failing: the finding still fires, but the test that stopped is named."""
    problems = run_judge(tmp_path, {SEEDS: "failed", TWO_SAMPLE: "passed"})
    assert problems == [f"docs/findings/sglang-cpu-greedy-verify.md: {TWO_SAMPLE} no longer fires (passed): fixed upstream there "
                        "(in part or whole), or the suite went blind there"]


def test_the_log_likelihood_entry_excuses_only_a_higher_likelihood(tmp_path):
    """Greedy verify emits argmaxes, which score higher than samples: a lower likelihood is another cause."""
    cases = {**dict.fromkeys(FIRING, "failed"), LOGLIK: "failed"}
    assert run_judge(tmp_path, cases, {**FIRING, LOGLIK: LOGLIK_MESSAGE.format(z="7.01", shift="+3.120")}) == []
    problems = run_judge(tmp_path, cases, {**FIRING, LOGLIK: LOGLIK_MESSAGE.format(z="-7.01", shift="-3.120")})
    assert any("unexplained failure" in p and LOGLIK in p for p in problems), problems


def test_a_run_without_the_lossless_suite_judges_the_must_fire_tests_it_ran(tmp_path):
    """The SGLang job's 0.5.20 run has correctness and integrity only: the two-sample test is not there to fire."""
    assert run_judge(tmp_path, {SEEDS: "failed", GREEDY.replace("test_lossless", "test_integrity"): "passed"}) == []
    assert any("no longer fires (none" in p for p in run_judge(tmp_path, {SEEDS: "passed"}))


def test_an_undocumented_failure_goes_red(tmp_path):
    """Greedy equality at T=0 is exact on CPU: its failure is no part of the greedy-verify finding."""
    problems = run_judge(tmp_path, {SEEDS: "failed", TWO_SAMPLE: "failed", GREEDY: "failed"}, {**FIRING, GREEDY: "AssertionError: 1 real"})
    assert any("unexplained failure (a harness defect or a new finding)" in p and "test_greedy_equality" in p for p in problems)


def test_an_unexplained_failure_names_its_reason(tmp_path, capsys):
    """The verdict line carries the failure's first message line: the CI log's tail is all a reader may get."""
    run = junit_file(tmp_path, {SEEDS: "failed", TWO_SAMPLE: "failed", GREEDY: "failed"},
                     messages={**FIRING, GREEDY: "RequestFault: connection to http://127.0.0.1:18173 broke during POST /generate\nsecond line"})
    assert judge_module.main(["sglang", str(run), str(KNOWN_PATH)]) == 1
    lines = [line for line in capsys.readouterr().err.splitlines() if "unexplained failure" in line]
    assert lines == ["sglang job: unexplained failure (a harness defect or a new finding): suites/test_lossless.py::"
                     "test_greedy_equality (RequestFault: connection to http://127.0.0.1:18173 broke during POST /generate)"]


def test_a_finding_that_stops_firing_goes_red(tmp_path):
    problems = run_judge(tmp_path, {SEEDS: "passed", TWO_SAMPLE: "passed", GREEDY: "passed"})
    assert any("sglang-cpu-greedy-verify.md no longer fires" in p for p in problems)
    assert sum("no longer fires (passed)" in p for p in problems) == 2


def test_a_t0_lossless_failure_is_not_covered(tmp_path):
    """The finding covers T > 0 only: a lossless failure at T = 0 would be something else."""
    t0 = "suites/test_lossless.py::test_two_sample_homogeneity[t=0-top_p=1]"
    problems = run_judge(tmp_path, {**dict.fromkeys(FIRING, "failed"), t0: "failed"},
                         {**FIRING, t0: TWO_SAMPLE_MESSAGE.replace("t=1-top_p=1", "t=0-top_p=1")})
    assert any("unexplained failure" in p for p in problems)


def test_no_test_or_an_error_goes_red(tmp_path):
    assert "no test ran" in run_judge(tmp_path, {SEEDS: "skipped"})
    assert any(p.startswith("error:") for p in run_judge(tmp_path, {SEEDS: "failed", TWO_SAMPLE: "failed", GREEDY: "error"}))


def test_the_command_line_exits_1_on_problems_and_2_on_unreadable_input(tmp_path, capsys):
    run = junit_file(tmp_path, {SEEDS: "passed"})
    assert judge_module.main(["sglang", str(run), str(KNOWN_PATH)]) == 1
    assert judge_module.main(["sglang", str(tmp_path / "missing.xml"), str(KNOWN_PATH)]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_a_findings_file_without_reasons_is_refused(tmp_path, capsys):
    """An entry that names tests without saying why they may fail, or a one-of liveness list, is refused in one line."""
    old = {"findings": [{"finding": "x.md", "may_fail": [SEEDS], "must_fire_one_of": [SEEDS]}]}
    (tmp_path / "old.json").write_text(json.dumps(old))
    run = junit_file(tmp_path, {SEEDS: "failed"}, messages=FIRING)
    assert judge_module.main(["sglang", str(run), str(tmp_path / "old.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "needs a test pattern and a reason_pattern" in err


@pytest.mark.parametrize("known_file", ["sglang_known_failures.json", "vllm_known_failures.json"])
def test_patterns_name_tests_that_exist(known_file):
    """Both jobs' findings files: each finding's write-up exists and each pattern names a test in suites/."""
    known = json.loads((ROOT / "docs" / "findings" / known_file).read_text())
    suites = {path.name: path.read_text() for path in (ROOT / "suites").glob("test_*.py")}
    judge_module.check_known(known)
    for finding in known["findings"]:
        assert (ROOT / finding["finding"]).is_file()
        for pattern in [entry["test"] for entry in finding["may_fail"]] + finding["must_fire"]:
            file_part, test_part = pattern.split("::")
            name = re.match(r"[a-z_]+", test_part.replace("\\", "")).group(0).rstrip("_")
            assert re.search(rf"def {name}", suites[Path(file_part).name]), pattern


REAL_RUN = '''
def _fail_on(failures):  # suites/test_integrity.py's way of failing: the first few broken cases, one per line
    message = [f"{len(failures)} of 6 cases broke the rule:\\n" + "\\n".join(f"  - {f}" for f in failures)]
    assert not message, "\\n".join(message)


def test_different_seeds_give_different_outputs():
    _fail_on(["seeds 11011 and 11012 gave the same 64 ids", "seeds 11011 and 11013 gave the same 64 ids"])


def test_greedy_answers_stay_valid_among_sampled_neighbours():
    {}["output_ids"]
'''


def test_the_reasons_match_the_junit_pytest_writes(tmp_path):
    """The message attribute as pytest itself writes it (continuation lines indented, a KeyError's own text)."""
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "test_integrity.py").write_text(REAL_RUN)
    xml = tmp_path / "run.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:specsuite.pytest_plugin.plugin", "-q",
                    f"--junitxml={xml}", "suites/test_integrity.py"], cwd=tmp_path, capture_output=True, timeout=120, check=False)
    results, messages = judge_module.outcomes(xml), judge_module.failure_messages(xml)
    assert results == {SEEDS: "failed", "suites/test_integrity.py::test_greedy_answers_stay_valid_among_sampled_neighbours": "failed"}
    problems = judge_module.judge(results, KNOWN, messages)
    assert problems == ["unexplained failure (a harness defect or a new finding): suites/test_integrity.py::"
                        "test_greedy_answers_stay_valid_among_sampled_neighbours (KeyError: 'output_ids')"]
