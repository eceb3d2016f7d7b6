"""`specsuite gsm8k` runs through the RunSession's GSM8K driver (the one `pytest suites -m gsm8k` uses): results.json
complete with one run per temperature, every answer in gsm8k.jsonl; a bad --gsm8k-path fails in one line before any
server starts, leaving no results folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specsuite.cli.main import main


def test_specsuite_gsm8k_runs_through_the_session_driver(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gsm8k", "--gsm8k-num-questions", "4", "--gsm8k-temperatures", "0,1", "--seed", "3", "--results-dir", str(tmp_path)]) == 0
    (run,) = [folder for folder in tmp_path.iterdir() if folder.is_dir()]
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    assert results["status"] == "complete" and results["seed"] == 3
    (arm,) = results["arms"].values()
    runs = arm["repeats"][0]["workloads"]["gsm8k"]
    assert [r["temperature"] for r in runs] == [0.0, 1.0] and all(r["source"] == "synthetic" for r in runs)
    records = (run / "arms" / "fix" / "gsm8k.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(records) == 8 and {json.loads(line)["temperature"] for line in records} == {0.0, 1.0}
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| t=0 |"))
    mean = runs[0]["accept_length"]["mean"]  # the table's accept-length column is the run's per-request mean
    assert row.split(" | ")[6] == ("-" if mean is None else f"{mean:.3f}")


def test_a_bad_gsm8k_path_fails_before_any_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results_dir = tmp_path / "results"
    assert main(["gsm8k", "--gsm8k-path", str(tmp_path / "missing.jsonl"), "--results-dir", str(results_dir)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "GSM8K file not found" in err[0]
    assert not results_dir.exists()
