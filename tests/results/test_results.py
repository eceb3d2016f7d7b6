"""Tests for specsuite.results.store: flushed JSONL records, atomic results.json, run folders, loading."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

from specsuite.errors import SpecsuiteError
from specsuite.results import store as results
from specsuite.results.store import (
    SCHEMA_VERSION,
    RecordWriter,
    RunDirectory,
    load_results,
    read_records,
    write_json_atomic,
)
from specsuite.results.types import Document

PROJECT_ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2025, 3, 4, 5, 6, 7, tzinfo=timezone.utc)
KEY = "sk-test-abcdef123456"


def test_each_record_is_on_disk_before_close(tmp_path):
    path = tmp_path / "r.jsonl"
    writer = RecordWriter(path)
    writer.write({"i": 1})
    assert read_records(path) == [{"i": 1}]
    writer.write({"i": 2})
    assert read_records(path) == [{"i": 1}, {"i": 2}]
    writer.close()


def test_records_survive_a_killed_process(tmp_path):
    path = tmp_path / "crash.jsonl"
    script = (
        "import os, signal, sys\n"
        "from specsuite.results.store import RecordWriter\n"
        "writer = RecordWriter(sys.argv[1])\n"
        "for i in range(3):\n"
        "    writer.write({'i': i})\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(path)], cwd=PROJECT_ROOT, timeout=30)
    assert done.returncode == -9
    assert read_records(path) == [{"i": 0}, {"i": 1}, {"i": 2}]


def test_numpy_values_become_plain_json(tmp_path):
    path = tmp_path / "r.jsonl"
    with RecordWriter(path, fsync=True) as writer:
        writer.write({
            "f": np.float32(0.5),
            "i": np.int64(7),
            "b": np.bool_(True),
            "arr": np.arange(6)[::2],
            "nan": float("nan"),
            "path": Path("/x"),
        })
    line = path.read_text().strip()
    assert json.loads(line) == {"f": 0.5, "i": 7, "b": True, "arr": [0, 2, 4], "nan": None, "path": "/x"}


def test_records_are_redacted(tmp_path):
    path = tmp_path / "r.jsonl"
    with RecordWriter(path, secrets=[KEY]) as writer:
        writer.write({"api_key": "whatever", "prompt": f"the key is {KEY}", "prompt_tokens": 3})
    assert read_records(path) == [{"api_key": "***", "prompt": "the key is ***", "prompt_tokens": 3}]
    assert KEY not in path.read_text()


def test_concurrent_writers_never_interleave_lines(tmp_path):
    path = tmp_path / "r.jsonl"
    writer = RecordWriter(path)
    payload = "x" * 5000  # long lines make a torn write visible

    def work(thread: int) -> None:
        for i in range(100):
            writer.write({"thread": thread, "i": i, "payload": payload})

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    writer.close()
    records = read_records(path)
    assert writer.count == 800
    assert sorted((r["thread"], r["i"]) for r in records) == [(t, i) for t in range(8) for i in range(100)]


def test_writing_after_close_or_a_non_mapping_is_an_error(tmp_path):
    writer = RecordWriter(tmp_path / "r.jsonl")
    with pytest.raises(SpecsuiteError, match="mapping"):
        writer.write([1, 2])  # type: ignore[arg-type]
    with pytest.raises(SpecsuiteError, match="not JSON serializable"):
        writer.write({"x": object()})
    writer.close()
    with pytest.raises(SpecsuiteError, match="closed"):
        writer.write({"i": 1})


def test_read_records_drops_a_torn_last_line_but_not_a_bad_middle_one(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"i": 1}\n{"i": 2}\n{"i": 3, "tor')
    assert read_records(path) == [{"i": 1}, {"i": 2}]
    path.write_bytes(b'{"i": 1}\nnot json\n{"i": 3}\n')
    with pytest.raises(SpecsuiteError, match="line 2"):
        read_records(path)


def test_atomic_write_replaces_and_leaves_no_temp_files(tmp_path):
    target = tmp_path / "out" / "results.json"
    write_json_atomic(target, {"a": 1})
    write_json_atomic(target, {"a": 2, "token": KEY}, secrets=[KEY])
    assert json.loads(target.read_text()) == {"a": 2, "token": "***"}
    assert os.listdir(target.parent) == ["results.json"]


def test_failed_atomic_write_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "results.json"
    write_json_atomic(target, {"a": 1})

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(results.os, "replace", broken_replace)
    with pytest.raises(SpecsuiteError, match="No space left"):
        write_json_atomic(target, {"a": 2})
    assert json.loads(target.read_text()) == {"a": 1}
    assert os.listdir(tmp_path) == ["results.json"]
    with pytest.raises(SpecsuiteError, match="not JSON serializable"):
        write_json_atomic(target, {"a": object()})
    assert json.loads(target.read_text()) == {"a": 1}


def test_run_id_format_and_seeded_suffix(tmp_path):
    first = RunDirectory(tmp_path / "one", seed=5, now=NOW)
    second = RunDirectory(tmp_path / "two", seed=5, now=NOW)
    other_seed = RunDirectory(tmp_path / "three", seed=6, now=NOW)
    assert re.fullmatch(r"20250304T050607Z-[0-9a-f]{6}", first.run_id)
    assert first.run_id == second.run_id != other_seed.run_id
    assert first.path == tmp_path / "one" / first.run_id and first.path.is_dir()


def test_run_ids_never_collide_in_one_folder(tmp_path):
    ids = {RunDirectory(tmp_path, seed=1, now=NOW).run_id for _ in range(3)}
    assert len(ids) == 3


def test_explicit_run_id_is_checked_and_never_reused(tmp_path):
    RunDirectory(tmp_path, run_id="nightly-1")
    with pytest.raises(SpecsuiteError, match="already exists"):
        RunDirectory(tmp_path, run_id="nightly-1")
    with pytest.raises(SpecsuiteError, match="invalid run id"):
        RunDirectory(tmp_path, run_id="../escape")


def test_arm_record_writers_follow_the_layout(tmp_path):
    with RunDirectory(tmp_path, seed=0, now=NOW) as run:
        writer = run.record_writer("fix")
        assert writer is run.record_writer("fix")
        assert writer.path == run.path / "arms" / "fix" / "requests.jsonl"
        assert run.record_writer("fix", "gsm8k").path.name == "gsm8k.jsonl"
        writer.write({"i": 1})
        with pytest.raises(SpecsuiteError, match="invalid arm name"):
            run.record_writer("a/b")
    assert writer.closed


def test_write_results_adds_the_header_and_redacts(tmp_path):
    run = RunDirectory(tmp_path, seed=0, now=NOW, secrets=[KEY])
    run.write_results(Document.from_dict({"schema_version": 99, "run_id": "forged", "seed": 0, "command": f"--api-key {KEY}", "arms": {}}))
    data = load_results(run.results_path)
    assert list(data.to_dict())[:5] == ["schema_version", "created_utc", "specsuite_version", "run_id", "status"]
    assert data.schema_version == SCHEMA_VERSION
    assert data.created_utc == "2025-03-04T05:06:07Z"
    assert data.run_id == run.run_id
    assert data.status == "running"
    assert isinstance(data.specsuite_version, str) and data.specsuite_version
    assert data.command == "--api-key ***"
    with pytest.raises(SpecsuiteError, match="invalid run status"):
        run.write_results(Document.from_dict({"status": "done"}))


def test_mark_interrupted_keeps_what_was_written(tmp_path):
    run = RunDirectory(tmp_path, seed=0, now=NOW)
    run.write_results(Document.from_dict({"seed": 3, "arms": {"fix": {"repeats": [{"repeat": 1, "cases": [1, 2]}]}}}))
    run.mark_interrupted("arm fix, gsm8k")
    data = load_results(run.path)
    assert data.status == "interrupted"
    assert data.stopped_at == "arm fix, gsm8k"
    assert data.to_dict()["arms"] == {"fix": {"repeats": [{"repeat": 1, "cases": [1, 2], "workloads": {}}]}} and data.seed == 3
    run.mark_failed("server died")
    assert load_results(run.path).status == "failed"
    assert load_results(run.path).error == "server died"


def test_mark_interrupted_before_any_results(tmp_path):
    run = RunDirectory(tmp_path, seed=0, now=NOW)
    run.mark_interrupted("startup")
    data = load_results(run.path)
    assert (data.status, data.stopped_at) == ("interrupted", "startup")


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b'{"status": "complete"}', "no schema_version"),
        (b'{"schema_version": 4}', "schema_version 4, newer than the supported 3"),
        (b'{"schema_version": "1"}', "invalid schema_version"),
        (b'{"schema_version": true}', "invalid schema_version"),
        (b"[1, 2]", "does not hold a JSON object"),
        (b'{"schema_version": 1,', "not valid JSON"),
    ],
)
def test_load_results_rejects_bad_files_in_one_line(tmp_path, content, expected):
    path = tmp_path / "results.json"
    path.write_bytes(content)
    with pytest.raises(SpecsuiteError) as info:
        load_results(path)
    assert expected in str(info.value)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_load_results_missing_file(tmp_path):
    with pytest.raises(SpecsuiteError, match="cannot read results file"):
        load_results(tmp_path / "absent.json")


def test_unknown_package_version_falls_back(monkeypatch):
    def not_installed(name):
        raise results.importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(results.importlib.metadata, "version", not_installed)
    assert results.specsuite_version() == "0+unknown"
