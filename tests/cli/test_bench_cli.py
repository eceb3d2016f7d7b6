"""`specsuite bench` end to end, as a thin adapter over the RunSession: against the embedded reference server it
appends one JSONL line to --output-file, prints bench_serving's table and the embedded-reference line, exits 0,
creates no run folder, and stops the server it launched; on Ctrl-C it saves the finished requests, stops the server
and exits 130.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

from specsuite.cli import main as cli
from tests.helpers.interrupt import after_finished, interrupt_mid_run

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["--num-prompts", "4", "--random-input-len", "32", "--random-output-len", "16", "--max-concurrency", "1", "--disable-tqdm"]


def _refused(url: str) -> bool:
    host, port = url.rsplit("/", 1)[-1].rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=2.0).close()
    except OSError:
        return True
    return False


def _served_url(results: Path) -> str | None:
    """The URL of the embedded server the command launched (its port is in its log's name), once the log exists."""
    for log in results.glob("server-logs/refserver-fix-*.log"):
        return f"http://127.0.0.1:{log.stem.rsplit('-', 1)[-1]}"
    return None


def test_bench_appends_one_line_prints_the_table_and_stops_its_server(tmp_path, capsys) -> None:
    output = tmp_path / "out" / "bench.jsonl"
    output.parent.mkdir()
    output.write_text('{"earlier": "run"}\n')
    assert cli.main(["bench", "--results-dir", str(tmp_path / "results"), "--output-file", str(output), *SMALL]) == cli.EXIT_OK
    stdout = capsys.readouterr().out
    assert "Serving Benchmark Result" in stdout and f"specsuite: appended the result to {output}" in stdout
    assert "server under test: the EMBEDDED REFERENCE EMULATION" in stdout.splitlines()[-1]
    lines = output.read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[0]) == {"earlier": "run"}  # appended, bench_serving's way
    record = json.loads(lines[1])
    assert record["completed"] == 4 and record["failed"] == 0 and record["status"] == "complete"
    assert record["server_under_test"]["embedded_reference"] is True and record["server_under_test"]["source"] == "embedded-reference"
    # No run folder: only the launched server's log goes to the results folder.
    # the launched server's log in a folder of its own, not loose beside the results
    assert [p.name for p in (tmp_path / "results").iterdir()] == ["server-logs"]
    assert [p.name.startswith("refserver-fix-") and p.suffix == ".log" for p in (tmp_path / "results" / "server-logs").iterdir()] == [True]
    assert _refused(record["server_under_test"]["url"])  # the launched server is gone


def test_ctrl_c_saves_the_finished_requests_and_stops_the_server(tmp_path) -> None:
    results, output = tmp_path / "results", tmp_path / "bench.jsonl"
    command = ["-m", "specsuite.cli.main", "bench", "--results-dir", str(results), "--output-file", str(output),
               "--num-prompts", "400", "--random-input-len", "32", "--random-output-len", "960", "--max-concurrency", "1", "--disable-tqdm"]
    # The signal goes once the launched server has finished four requests after the first look at its counter: at most
    # its own startup warmup (SGLang's, counted; the first look can come before it) and the benchmark's warmup, then
    # two or more measured ones, the first of them answered and saved, since one runs at a time. 400 prompts of up to
    # 960 tokens take minutes, so it lands mid-run.
    code, stderr = interrupt_mid_run(command, cwd=tmp_path, ready=after_finished(lambda: _served_url(results), 4))
    assert code == 130, stderr
    assert "finished requests saved" in stderr and stderr.rstrip().endswith("specsuite: interrupted"), stderr
    assert "Traceback" not in stderr, stderr
    record = json.loads(output.read_text().splitlines()[-1])
    assert record["status"] == "interrupted" and 1 <= record["completed"] < 400
    (log,) = results.glob("server-logs/refserver-fix-*.log")
    port = log.stem.rsplit("-", 1)[-1]
    assert _refused(f"http://127.0.0.1:{port}")  # the session stopped the server it launched
