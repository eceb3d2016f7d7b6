"""Under pytest too, requests the harness gave up waiting for are told apart from the server's failures in the
terminal's specsuite section, with the timeout and the load (pytest lists the failed test; before, its message was all
there was, and nothing said whether the server or the harness gave up).

A 0.05 s --request-timeout makes the embedded reference server's answers come too late, without slowing it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 600  # a hang guard: the run takes about 20 s at load 9 on 2 cores


def test_timed_out_requests_are_named_as_the_harness_giving_up(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "suites/test_correctness.py::test_requests_succeed[t=0-top_p=1]",
               "--request-timeout", "0.05", "--fault-policy", "consecutive=1000,retries=0", "--results-dir", str(tmp_path)]
    done = subprocess.run(command, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=TIMEOUT_S)
    lines = [line for line in done.stdout.splitlines() if line.startswith("specsuite failed: ")]
    assert done.returncode == 1 and len(lines) == 1, done.stdout[-3000:]
    assert "the harness gave up waiting on" in lines[0] and "--request-timeout of 0.05 s" in lines[0] and "load average" in lines[0], lines
