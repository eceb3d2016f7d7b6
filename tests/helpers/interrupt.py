"""Ctrl-C on a benchmark process mid-run, for the tests of what an interrupt saves."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def interrupt_mid_run(command: Sequence[str], *, cwd: Path, ready: Callable[[subprocess.Popen], bool], settle_s: float) -> tuple[int, str]:
    """Start `command` (Python, this checkout first on the path), wait until `ready`, let it run `settle_s` more, send
    SIGINT as a terminal would to the process, and return its exit code and stderr (it is killed if it hangs)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, *command], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not ready(proc) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(settle_s)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, stderr
