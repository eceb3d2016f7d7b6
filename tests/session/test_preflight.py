"""Preflight before work: what a run needs that is not there (the database driver of a postgresql:// --results-db,
the `datasets` package of a Hub or Parquet GSM8K, a --tokenizer folder, a GSM8K file, the results folder) is refused
in one line before the first server starts or the first test runs, under pytest (exit 4) and `specsuite run` (exit 2).

Before: `pytest suites/ --results-db postgresql://...` without psycopg ran the whole suite, exited 0 and said only in
its last line that the night was not stored; `specsuite run --tokenizer /nonexistent` started four servers first and
then told the user to pass --tokenizer, which they had."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specsuite.cli.main import main
from specsuite.orchestration import runner

ROOT = Path(__file__).resolve().parents[2]
REFUSAL_BUDGET_S = 60.0  # the refusal takes about 3 s on 2 idle cores (pytest's own start); generous for a loaded machine


def test_a_postgresql_store_without_psycopg_is_named() -> None:
    from specsuite.session.dependencies import missing_for_results_db  # here: the other tests run against older code too

    line = missing_for_results_db("postgresql://specsuite@db:5432/specsuite", found=lambda package: False)
    assert line is not None and "psycopg" in line and "'postgres' extra" in line
    assert missing_for_results_db("postgresql://specsuite@db/specsuite", found=lambda package: True) is None
    assert missing_for_results_db("sqlite:///x.sqlite", found=lambda package: False) is None


def test_missing_local_paths_are_named(tmp_path: Path) -> None:
    from specsuite.session.dependencies import missing_local_paths

    assert "--tokenizer /nonexistent: no such folder" in (missing_local_paths(tokenizer="/nonexistent") or "")
    assert "GSM8K file not found" in (missing_local_paths(gsm8k_path=str(tmp_path / "gsm8k.jsonl")) or "")
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert "is a file, not a folder" in (missing_local_paths(results_dir=str(blocker / "out")) or "")
    assert missing_local_paths(tokenizer=str(tmp_path), gsm8k_path="synthetic", results_dir=str(tmp_path / "new")) is None


def test_pytest_refuses_a_postgresql_store_without_psycopg_before_any_test(tmp_path: Path) -> None:
    """A real pytest process with psycopg hidden (sys.modules['psycopg'] = None makes it unfindable)."""
    code = ("import sys; sys.modules['psycopg'] = None; import pytest; sys.exit(pytest.main(['-p', 'no:cacheprovider', 'suites/', "
            f"'-m', 'correctness', '--results-dir', {str(tmp_path)!r}, '--results-db', 'postgresql://specsuite@127.0.0.1:9/specsuite']))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    elapsed = time.perf_counter() - started
    assert result.returncode == 4, result.stdout + result.stderr
    assert "needs the psycopg package" in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert "collected" not in result.stdout and not any(tmp_path.iterdir()), result.stdout  # nothing collected, no server
    assert elapsed < REFUSAL_BUDGET_S, elapsed


def test_specsuite_run_refuses_a_missing_tokenizer_before_any_session(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    def no_sessions(*args, **kwargs):
        raise AssertionError("a session started")

    monkeypatch.setattr(runner, "run_sessions", no_sessions)
    code = main(["run", "--results-dir", str(tmp_path), "--tokenizer", "/nonexistent"])
    err = capsys.readouterr().err
    assert code == 2 and err.strip() == ("specsuite: error: --tokenizer /nonexistent: no such folder on this machine "
                                         "(it must hold the model's tokenizer files)"), err
