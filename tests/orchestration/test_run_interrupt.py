"""Ctrl-C on `specsuite run`: it says at once what it stops, stops its sessions and the servers they launched,
records the interruption (not pytest's last line), writes the partial results and, once a server was reached, the
partial summary and report; exit 130. An early interrupt's recorded error names the interruption, not a line such as
`correctness: 111 deselected in 14.96s`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specsuite.orchestration.runner import _InterruptWatch
from specsuite.server.refserver_contract import MODULE

ROOT = Path(__file__).resolve().parents[2]
HANG_GUARD_S = 120  # not a timing check: only that the run ends at all


def _refservers_on(ports: set[str]) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                words = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            except OSError:
                continue
            if MODULE in words and any(words[i + 1] in ports for i, w in enumerate(words[:-1]) if w == "--port"):
                found.append(" ".join(words))
    return found


def _interrupt(tmp_path: Path, ready, extra_args: tuple[str, ...] = ()) -> tuple[int, str, dict]:
    run_dir = tmp_path / "r"
    process = subprocess.Popen([sys.executable, "-m", "specsuite.cli.main", "run", "-m", "correctness", "--temperatures", "0,1",
                                "--top-p", "1", "--results-dir", str(tmp_path), "--run-id", "r", *extra_args],
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                               env={**os.environ, "PYTHONPATH": str(ROOT)},
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + HANG_GUARD_S
        while not ready(run_dir) and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        os.killpg(process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        out, _ = process.communicate(timeout=HANG_GUARD_S)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return process.returncode, out, json.loads((run_dir / "results.json").read_text())


def _ports(results: dict) -> set[str]:
    return {command[command.index("--port") + 1] for arm in results["arms"].values() for repeat in arm["repeats"]
            for part in repeat.get("parts") or [repeat] for command in [" ".join(part.get("command") or []).split()] if "--port" in command}


@pytest.mark.slow
def test_an_early_interrupt_records_the_interruption(tmp_path: Path) -> None:
    # Once a session's log exists its process is being started (runner._start opens the log, then Popen); the folder
    # alone exists a moment before any session does, and a signal landing there left no repeat to record (seen under load).
    code, out, results = _interrupt(tmp_path, lambda run_dir: any((run_dir / "sessions").glob("*.log")))
    assert code == 130, out
    assert "interrupted (SIGINT): stopping" in out, out
    assert results["status"] == "interrupted" and results["stopped_at"].startswith("during ")
    errors = [r.get("error") or "" for arm in results["arms"].values() for r in arm["repeats"]]
    assert errors and all("interrupted" in e and "deselected" not in e for e in errors), errors
    assert not _refservers_on(_ports(results))


@pytest.mark.slow
def test_a_late_interrupt_writes_the_partial_report(tmp_path: Path) -> None:
    def has_cases(run_dir: Path) -> bool:
        try:
            arms = json.loads((run_dir / "results.json").read_text())["arms"].values()
        except (OSError, ValueError, KeyError):
            return False
        return any(any(r.get("cases") for r in arm["repeats"]) for arm in arms)

    # Two repeats: a session writes its cases when it ends, and the two arms of a repeat end together, so the
    # signal is sent once the first repeat has cases and lands while the second repeat's sessions run (with one
    # repeat it can land after the sessions on an idle machine, when there is nothing left to stop).
    code, out, results = _interrupt(tmp_path, has_cases, ("--repeats", "2"))
    assert code == 130, out
    assert "interrupted (SIGINT): stopping" in out and "partial report in" in out, out
    assert results["status"] == "interrupted"
    summary = (tmp_path / "r" / "summary.md").read_text()
    assert "**Run interrupted**" in summary.split("## Verdict")[0]
    assert (tmp_path / "r" / "report" / "report.html").is_file()
    assert not _refservers_on(_ports(results))


def test_a_signal_while_a_session_starts_waits_until_the_session_is_listed() -> None:
    """An interrupt between a session's Popen and its place in the running list would leave it running, unstopped and
    unrecorded: inside `deferred` the first signal only says what it stops; the block's end raises."""
    running: list[str] = []
    notes: list[str] = []
    watch = _InterruptWatch(running, notes.append)  # type: ignore[arg-type]
    with watch:
        with pytest.raises(KeyboardInterrupt, match="SIGINT"):
            with watch.deferred():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)  # the handler has run: nothing was raised inside the block
                running.append("started")
        assert running == ["started"] and watch.signum == signal.SIGINT
        assert notes and notes[0].startswith("interrupted (SIGINT)")
        with pytest.raises(KeyboardInterrupt, match="second SIGINT"):  # a second signal interrupts at once, deferred or not
            with watch.deferred():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)
