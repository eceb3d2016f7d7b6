"""Small things a new user met: `specsuite bench` with its defaults, bench_serving's `--base-url`, `specsuite --version`,
a scheme-less URL refused before anything is written, the bench's server logs in a folder of their own, results.json
readable like the rest, and an interrupted run's summary and last line."""

from __future__ import annotations

import argparse
import gzip
import json
import os
import stat
from pathlib import Path

import pytest

from specsuite.cli.bench import fit_num_prompts
from specsuite.cli.main import build_parser, main
from specsuite.cli.run import _finish_interrupted
from specsuite.errors import SpecsuiteError
from specsuite.orchestration.main_job import MainJobOutcome, record_interruption
from specsuite.reports.summary import summary_document
from specsuite.results.store import RunDirectory, write_json_atomic
from specsuite.results.types import Document
from specsuite.session import run_session
from specsuite.session.config import RunConfig

MAIN_JOB = Path(__file__).parents[1] / "data" / "ab_results" / "main_job_smoke.json.gz"


def _bench_args(*argv: str) -> argparse.Namespace:
    args = build_parser().parse_args(["bench", *argv])
    args.argv = ["bench", *argv]
    return args


def test_bench_defaults_fit_the_bundled_prompts() -> None:
    """Before: 'the text source has 426 usable prompts, fewer than --num-prompts 1000', after the server had started."""
    args = _bench_args()
    assert args.num_prompts == 1000  # bench_serving's default
    assert "--num-prompts 426" in (fit_num_prompts(args) or "") and args.num_prompts == 426
    with pytest.raises(SpecsuiteError, match="--num-prompts 1000: the bundled prompts has 426 usable prompts"):
        fit_num_prompts(_bench_args("--num-prompts", "1000"))  # asked for explicitly: refused, in one line
    fitting = _bench_args("--num-prompts", "64")
    assert fit_num_prompts(fitting) is None and fitting.num_prompts == 64


def test_bench_takes_bench_servings_base_url(capsys: pytest.CaptureFixture[str]) -> None:
    assert build_parser().parse_args(["bench", "--base-url", "http://node:30000"]).server_url == "http://node:30000"
    assert "deprecat" not in capsys.readouterr().err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0 and capsys.readouterr().out.startswith("specsuite ")


def test_a_scheme_less_url_is_refused_before_any_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "--server-url", "127.0.0.1:9", "--results-dir", str(tmp_path), "--run-id", "r"])
    err = capsys.readouterr().err
    assert code == 2 and "--server-url must look like http://host:port, got '127.0.0.1:9'" in err
    assert not (tmp_path / "r").exists()


def test_bench_server_logs_go_in_their_own_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Path] = {}
    monkeypatch.setattr(run_session, "start_server", lambda options, log_dir, **_: seen.setdefault("logs", log_dir))
    session = run_session.RunSession(RunConfig(results_dir=str(tmp_path)))
    session.start_endpoint()
    assert seen["logs"] == tmp_path / "server-logs" and seen["logs"].is_dir()


def test_results_json_is_readable_like_the_rest(tmp_path: Path) -> None:
    previous = os.umask(0o022)
    try:
        path = write_json_atomic(tmp_path / "results.json", {"a": 1})
        (tmp_path / "summary.md").write_text("x")
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644 == stat.S_IMODE((tmp_path / "summary.md").stat().st_mode)


def test_an_interrupted_summary_names_the_unfinished_arm() -> None:
    results = json.loads(gzip.decompress(MAIN_JOB.read_bytes()))
    results["status"], results["stopped_at"] = "interrupted", "during fix repeat 1"
    results["arms"]["fix"]["repeats"] = [{"repeat": 1, "cases": [], "workloads": {}}]
    summary = summary_document(Document.from_dict(results), "exit 130: interrupted")
    assert "- **fix**: no results: it had finished nothing when the run stopped" in summary
    assert "**nofix**: no results" not in summary


def test_an_interrupted_runs_last_line_has_the_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    merged = Document.from_dict({"status": "running", "server_under_test": {}, "arm_order": ["nofix"], "arms": {}})
    outcome = record_interruption(MainJobOutcome(merged, RunDirectory(tmp_path, run_id="r"), 0.0, True))
    code = _finish_interrupted(outcome, no_report=True)
    assert code == 130 and capsys.readouterr().err.rstrip().splitlines()[-1].endswith("exit 130")


def test_a_sessions_junit_file_is_not_overridden(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The gate reads each session's JUnit XML: a --junit-xml for the sessions would silently replace it."""
    code = main(["run", "--results-dir", str(tmp_path), "--run-id", "r", "--pytest-arg=--junit-xml=x.xml"])
    assert code == 2 and "sessions/<arm>-r<k>.junit.xml" in capsys.readouterr().err and not (tmp_path / "r").exists()
