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


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it (read from /proc, so it sees children started by vLLM itself)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the process ended while we looked
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


def pin_unbound_threads(root_pid: int, cpu: int) -> int:
    """Pin every thread under `root_pid` that may still run on every core to `cpu`, and leave the threads
    the server bound itself alone (vLLM's CPU worker binds its OpenMP threads to the cores it computes on,
    and keeps one core for the rest: its API server and engine loop float over both unless pinned).
    Returns how many threads were pinned."""
    if not can_pin():
        return 0
    everywhere = set(range(os.cpu_count() or 1))
    pinned = 0
    for pid in descendants(root_pid):
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                if os.sched_getaffinity(int(task.name)) >= everywhere:
                    os.sched_setaffinity(int(task.name), {cpu})
                    pinned += 1
            except (ProcessLookupError, PermissionError, FileNotFoundError):
                pass
    return pinned
