"""A missing optional dependency is one line naming the extra, under pytest and `specsuite run` alike; a family whose
tests errored reads "errored: REASON" in the verdict lines (terminal and summary.md), never "Not run"."""

from __future__ import annotations

import copy
import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from specsuite.analysis.verdicts import compare_arms
from specsuite.cli.main import main
from specsuite.orchestration.junit import read_junit
from specsuite.reports.document import ANALYSIS_KEY
from specsuite.reports.overview import not_run_line
from specsuite.reports.summary import run_verdict_lines
from specsuite.results.types import Document
from specsuite.session import dependencies

MAIN_JOB = Path(__file__).parents[1] / "data" / "ab_results" / "main_job_smoke.json.gz"
ROOT = Path(__file__).resolve().parents[2]
WITHOUT_DATASETS = "import specsuite.session.dependencies as d; d.installed = lambda package: package != 'datasets'; "


def test_the_line_names_the_extra() -> None:
    line = dependencies.missing_for_gsm8k("hf", found=lambda package: False)
    assert line is not None and "datasets" in line and "'hf' extra" in line and "\n" not in line
    assert dependencies.missing_for_gsm8k("q.parquet", found=lambda package: False) is not None
    assert dependencies.missing_for_gsm8k("synthetic", found=lambda package: False) is None
    assert dependencies.missing_for_gsm8k("hf", found=lambda package: True) is None


def test_pytest_says_it_in_one_line_before_any_server() -> None:
    """Before: 174 lines of tracebacks, one per GSM8K test."""
    code = (WITHOUT_DATASETS + "import sys, pytest; sys.exit(pytest.main(['-p', 'specsuite.pytest_plugin.plugin', '--pyargs', 'specsuite.suites', "
            "'-m', 'gsm8k', '-p', 'no:cacheprovider', '-q', '--gsm8k-path', 'hf', '--server-url', 'http://127.0.0.1:9']))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    out = done.stdout + done.stderr
    assert done.returncode == 4, out
    errors = [line for line in out.splitlines() if "needs the datasets package" in line]
    assert len(errors) == 1 and "'hf' extra" in errors[0] and "Traceback" not in out, out


def test_specsuite_run_says_it_in_one_line_before_any_session(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: exit 0, GSM8K listed under 'Not run', the reason only in the session logs."""
    monkeypatch.setattr(dependencies, "installed", lambda package: package != "datasets")
    code = main(["run", "--results-dir", str(tmp_path), "--run-id", "r", "--pytest-arg=--gsm8k-path=hf"])
    out = "".join(capsys.readouterr())
    assert code == 2 and "needs the datasets package" in out and "'hf' extra" in out, out
    assert not (tmp_path / "r").exists()
    from specsuite.cli.run import selects  # -m correctness runs no GSM8K: the path is not its concern

    assert selects("correctness or gsm8k or perf", "gsm8k") and not selects("correctness", "gsm8k") and not selects("not gsm8k", "gsm8k")


def test_junit_outcomes_keep_one_line_messages(tmp_path: Path) -> None:
    """Read from a real pytest's JUnit XML: a failure, an error in a fixture, a skip and a pass."""
    (tmp_path / "test_family.py").write_text(
        "import pytest\n"
        "@pytest.fixture\n"
        "def broken():\n"
        "    raise RuntimeError('warmup needs 9000 tokens, the server takes 4096')\n"
        "def test_fails():\n"
        "    assert 1 == 2, 'one is not two'\n"
        "def test_errors(broken):\n"
        "    pass\n"
        "def test_skips():\n"
        "    pytest.skip('no')\n"
        "def test_passes():\n"
        "    pass\n", encoding="utf-8")
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={tmp_path / 'j.xml'}", "test_family.py"],
                   cwd=tmp_path, capture_output=True, timeout=120)
    outcome = read_junit(tmp_path / "j.xml")
    assert outcome is not None
    outcomes = outcome.to_dict()
    assert outcomes["passed"] == 1 and outcomes["skipped"] == 1
    by_function = {f["function"]: f for f in outcomes["failed"]}
    assert by_function["test_fails"]["kind"] == "failed" and by_function["test_fails"]["module"] == "test_family"
    assert by_function["test_fails"]["message"].startswith("one is not two")
    assert by_function["test_errors"] == {"test": "test_family::test_errors", "module": "test_family", "function": "test_errors",
                                          "kind": "error", "message": "warmup needs 9000 tokens, the server takes 4096"}
    assert read_junit(tmp_path / "missing.xml") is None


def test_an_errored_family_reads_errored_not_not_run() -> None:
    results = json.loads(gzip.decompress(MAIN_JOB.read_bytes()))
    for name in ("nofix", "fix"):
        repeat = results["arms"][name]["repeats"][0]
        repeat["workloads"].pop("gsm8k")
        repeat["tests"] = {"passed": 10, "skipped": 0, "failed": [
            {"test": "test_gsm8k::test_gsm8k_accuracy[t=0]", "module": "test_gsm8k", "function": "test_gsm8k_accuracy",
             "kind": "error", "message": "--gsm8k-path hf needs the datasets package"}]}
    bench_only = copy.deepcopy(results)
    results[ANALYSIS_KEY] = compare_arms(Document.from_dict(results)).to_dict()
    lines = run_verdict_lines(Document.from_dict(results))
    assert "**nofix** · GSM8K: **errored**: --gsm8k-path hf needs the datasets package" in lines
    assert "**fix** (baseline) · GSM8K: **errored**: --gsm8k-path hf needs the datasets package" in lines
    assert "GSM8K" not in (not_run_line(Document.from_dict(results)) or "")
    # a family with data is never "errored", whatever failed in its suite
    del bench_only["arms"]["nofix"]["repeats"][0]["tests"]
    bench_only["arms"]["fix"]["repeats"][0]["tests"]["failed"][0].update(module="test_serving_bench", kind="failed")
    bench_only[ANALYSIS_KEY] = compare_arms(Document.from_dict(bench_only)).to_dict()
    assert not any("errored" in line for line in run_verdict_lines(Document.from_dict(bench_only)))
