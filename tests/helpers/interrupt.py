"""Ctrl-C on a benchmark process mid-run, for the tests of what an interrupt saves.

The signal is sent once the server has finished some of the run's requests (its `sglang:num_requests_total`, a count
of finished requests that /flush_cache does not reset), not after a fixed sleep: on a loaded machine a fixed sleep
landed before the first request (tokenizer load, warmup) or, with short requests, after the last one. The launcher's
/health polls are not counted: their one-token generations carry log_metrics=False, as SGLang's do (counted, under
load the polls and warmups would read as "the warmup and two measured requests").
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FINISHED_COUNTER = "sglang:num_requests_total"


def finished_requests(base_url: str) -> float | None:
    """The server's count of finished requests (/metrics), None while it does not answer."""
    try:
        with urllib.request.urlopen(f"{base_url}/metrics", timeout=2.0) as response:
            text = response.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(FINISHED_COUNTER):
            return float(line.rsplit(" ", 1)[-1])
    return None


def after_finished(base_url: Callable[[], str | None], count: int) -> Callable[[subprocess.Popen], bool]:
    """A readiness check: true once the server at `base_url()` (None: not known yet) has finished `count` more
    requests than when it was first seen."""
    first: list[float] = []

    def ready(_proc: subprocess.Popen) -> bool:
        url = base_url()
        seen = finished_requests(url) if url else None
        if seen is None:
            return False
        if not first:
            first.append(seen)
        return seen >= first[0] + count

    return ready


def interrupt_mid_run(command: Sequence[str], *, cwd: Path, ready: Callable[[subprocess.Popen], bool], settle_s: float = 0.0) -> tuple[int, str]:
    """Start `command` (Python, this checkout first on the path), wait until `ready`, let it run `settle_s` more, send
    SIGINT as a terminal would to the process, and return its exit code and stderr (it is killed if it hangs)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # SIGINT back to its default in the child: a runner started in the background by a non-interactive shell ignores
    # SIGINT, children inherit that, and Python then installs no KeyboardInterrupt handler (the run went on to its end).
    proc = subprocess.Popen([sys.executable, *command], cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120
        while not ready(proc) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(settle_s)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, stderr
