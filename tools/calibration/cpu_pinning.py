"""Pin the benchmark client and the server under test to separate cores, so neither steals the
other's core and the scheduler does not migrate them mid-run (a 2-core machine: client on CPU 0,
server on CPU 1). Linux only; elsewhere the calls do nothing and return False."""

from __future__ import annotations

import os
from pathlib import Path

from specsuite.server.launcher import group_members

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



def server_threads(server_pid: int) -> list[tuple[int, set[int]]]:
    """(thread id, cores it may run on) for every thread of the server's process group (LaunchedServer
    makes the server its group's leader, and vLLM's engine and worker processes stay in the group)."""
    found = []
    for pid in group_members(server_pid):
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                found.append((int(task.name), os.sched_getaffinity(int(task.name))))
            except (ProcessLookupError, FileNotFoundError):
                pass  # ended while we looked
    return found


def pin_unbound_threads(server_pid: int, cpu: int) -> int:
    """Pin every server thread that may still run on every core to `cpu`, and leave the threads the
    server bound itself alone (vLLM's CPU worker binds its OpenMP threads to the cores it computes on,
    and keeps one core for the rest: its API server and engine loop float over both unless pinned).
    Returns how many threads were pinned."""
    if not can_pin():
        return 0
    everywhere = set(range(os.cpu_count() or 1))
    pinned = 0
    for tid, mask in server_threads(server_pid):
        if mask >= everywhere:
            try:
                os.sched_setaffinity(tid, {cpu})
                pinned += 1
            except (ProcessLookupError, PermissionError):
                pass
    return pinned
