"""Pin the benchmark client and the server under test to separate cores, so neither steals the
other's core and the scheduler does not migrate them mid-run (a 2-core machine: client on CPU 0,
server on CPU 1). Linux only; elsewhere the calls do nothing and return False."""

from __future__ import annotations

import os
from pathlib import Path

CLIENT_CPU, SERVER_CPU = 0, 1


def can_pin() -> bool:
    return hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) >= 2


def pin_this_process(cpu: int = CLIENT_CPU) -> bool:
    """Pin the calling process (and the children it starts later) to one core."""
    if not can_pin():
        return False
    os.sched_setaffinity(0, {cpu})
    return True


def pin_process(pid: int | None, cpu: int = SERVER_CPU) -> bool:
    """Pin every thread of a running process (affinity is per thread on Linux)."""
    if pid is None or not can_pin():
        return False
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            os.sched_setaffinity(int(task.name), {cpu})
        except (ProcessLookupError, PermissionError):
            pass
    return True
