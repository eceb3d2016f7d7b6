"""SIGTERM handling: a terminated run saves what it has and stops its servers, as on Ctrl-C.

Python's default SIGTERM ends the process at once: no `finally`, no `atexit`, so no final
results.json and a launched server left running. `terminate_as_interrupt` makes SIGTERM raise
KeyboardInterrupt instead, so the Ctrl-C paths (mark the run interrupted, stop the server) run.

`specsuite run` runs each pytest session as a child process. `subprocess.run` gives a child only a
quarter of a second after KeyboardInterrupt before it SIGKILLs it, which would cut the child's own
cleanup short, so the CLI's handler first lets its children finish: on SIGTERM it forwards SIGTERM
to them; on SIGINT it leaves them alone (a terminal's Ctrl-C reaches the whole process group).
Either way it waits up to `grace_s` for them to exit, then raises KeyboardInterrupt. A second
signal interrupts at once. Only children in this process's own group count: a launched server runs
in its own session and is stopped by the code that launched it, on the way out.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import FrameType

CHILD_GRACE_S = 30.0
_POLL_S = 0.05

Restore = Callable[[], None]


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"received {signal.Signals(signum).name}")


def terminate_as_interrupt() -> Restore:
    """Make SIGTERM raise KeyboardInterrupt in the main thread; returns a function restoring the old handler.

    Leaves a handler someone else installed alone, and does nothing outside the main thread.
    """
    try:
        previous = signal.getsignal(signal.SIGTERM)
        if previous not in (signal.SIG_DFL, None):
            return lambda: None
        signal.signal(signal.SIGTERM, _raise_interrupt)
    except ValueError:  # not the main thread
        return lambda: None
    return lambda: signal.signal(signal.SIGTERM, previous)


def child_pids(parent: int | None = None, process_group: int | None = None) -> list[int]:
    """Direct children of `parent` (default: this process) that have not exited, from /proc;
    only those in `process_group` when given."""
    parent = os.getpid() if parent is None else parent
    children = []
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields is None or int(fields[1]) != parent or fields[0] in ("Z", "X"):
            continue
        if process_group is None or int(fields[2]) == process_group:
            children.append(int(entry.name))
    return children


def _stat_fields(pid: int) -> list[str] | None:
    """State, ppid, process group, ... of /proc/<pid>/stat; None when the process is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2 :].split()  # the command name may hold spaces and parentheses


def _exited(pid: int) -> bool:
    # A zombie has exited; waiting here must not reap it, or subprocess would lose its exit status.
    fields = _stat_fields(pid)
    return fields is None or fields[0] in ("Z", "X")


def wait_for_exit(pids: Iterable[int], timeout_s: float) -> bool:
    """True when every pid has exited within `timeout_s` (without reaping them)."""
    pending = list(pids)
    deadline = time.monotonic() + timeout_s
    while pending:
        pending = [pid for pid in pending if not _exited(pid)]
        if not pending:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_S)
    return True


def interrupt_after_children(grace_s: float = CHILD_GRACE_S) -> Restore:
    """The CLI's SIGTERM/SIGINT handling (module docstring); returns a function restoring the old handlers."""
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

    def handle(signum: int, frame: FrameType | None) -> None:
        for sig in previous:  # a second signal interrupts at once
            signal.signal(sig, _raise_interrupt)
        children = child_pids(process_group=os.getpgrp())
        if signum == signal.SIGTERM:
            for pid in children:
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        wait_for_exit(children, grace_s)
        _raise_interrupt(signum, frame)

    for sig in previous:
        signal.signal(sig, handle)

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    return restore
