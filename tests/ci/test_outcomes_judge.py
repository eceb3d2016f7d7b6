"""The live-server jobs' judge (.ci/outcomes_judge.py) with the SGLang job's findings: it passes only when
every failure is a documented finding and every finding still fires; the findings file names tests that
exist, each pattern matching a test id as pytest writes it."""

from __future__ import annotations

import importlib.util
import json
import re
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


def run_judge(tmp_path: Path, cases: dict[str, str]) -> list[str]:
    return judge_module.judge(judge_module.outcomes(junit_file(tmp_path, cases)), KNOWN)


def test_the_documented_failures_alone_pass(tmp_path):
    assert run_judge(tmp_path, {SEEDS: "failed", TWO_SAMPLE: "failed", GREEDY: "passed"}) == []


def test_an_undocumented_failure_goes_red(tmp_path):
    """Greedy equality at T=0 is exact on CPU: its failure is no part of the greedy-verify finding."""
    problems = run_judge(tmp_path, {SEEDS: "failed", GREEDY: "failed"})
    assert any("unexplained failure" in p and "test_greedy_equality" in p for p in problems)


def test_an_unexplained_failure_names_its_reason(tmp_path, capsys):
    """The verdict line carries the failure's first message line: the CI log's tail is all a reader may get."""
    run = junit_file(tmp_path, {SEEDS: "failed", GREEDY: "failed"},
                     message="RequestFault: connection to http://127.0.0.1:18173 broke during POST /generate&#10;second line")
    assert judge_module.main(["sglang", str(run), str(KNOWN_PATH)]) == 1
    lines = [line for line in capsys.readouterr().err.splitlines() if "unexplained failure" in line]
    assert lines == ["sglang job: unexplained failure (a harness defect or a new finding): suites/test_lossless.py::"
                     "test_greedy_equality (RequestFault: connection to http://127.0.0.1:18173 broke during POST /generate)"]


def test_a_finding_that_stops_firing_goes_red(tmp_path):
    problems = run_judge(tmp_path, {SEEDS: "passed", TWO_SAMPLE: "passed", GREEDY: "passed"})
    assert any("sglang-cpu-greedy-verify.md no longer fires" in p for p in problems)


def test_a_t0_lossless_failure_is_not_covered(tmp_path):
    """The finding covers T > 0 only: a lossless failure at T = 0 would be something else."""
    problems = run_judge(tmp_path, {SEEDS: "failed", "suites/test_lossless.py::test_two_sample_homogeneity[t=0-top_p=1]": "failed"})
    assert any("unexplained failure" in p for p in problems)


def test_no_test_or_an_error_goes_red(tmp_path):
    assert "no test ran" in run_judge(tmp_path, {SEEDS: "skipped"})
    assert any(p.startswith("error:") for p in run_judge(tmp_path, {SEEDS: "failed", GREEDY: "error"}))


def test_the_command_line_exits_1_on_problems_and_2_on_unreadable_input(tmp_path, capsys):
    run = junit_file(tmp_path, {SEEDS: "passed"})
    assert judge_module.main(["sglang", str(run), str(KNOWN_PATH)]) == 1
    assert judge_module.main(["sglang", str(tmp_path / "missing.xml"), str(KNOWN_PATH)]) == 2
    assert "cannot read" in capsys.readouterr().err


@pytest.mark.parametrize("known_file", ["sglang_known_failures.json", "vllm_known_failures.json"])
def test_patterns_name_tests_that_exist(known_file):
    """Both jobs' findings files: each finding's write-up exists and each pattern names a test in suites/."""
    known = json.loads((ROOT / "docs" / "findings" / known_file).read_text())
    suites = {path.name: path.read_text() for path in (ROOT / "suites").glob("test_*.py")}
    for finding in known["findings"]:
        assert (ROOT / finding["finding"]).is_file()
        for pattern in finding["may_fail"] + finding["must_fire_one_of"]:
            file_part, test_part = pattern.split("::")
            name = re.match(r"[a-z_]+", test_part.replace("\\", "")).group(0).rstrip("_")
            assert re.search(rf"def {name}", suites[Path(file_part).name]), pattern
