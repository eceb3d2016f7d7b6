"""The emulated device clock: which decode step a result belongs to, and when it becomes visible.

The device runs numbered steps back to back while any request runs: step i ends at
`origin + (i - origin_step + 1) * step`. A request joins one step after the first step that
starts after its prefill (the device takes a step to take it in) and then decodes once per step.

`StepTimeline` is the engine's side: the engine computes a request's steps ahead of the device
(up to a lead) and hands each result in under its step number; once every running request has
handed in its part of a step, the step is complete and gets its deadline. A step completed after
its nominal deadline moves the clock by the delay: the emulated device waited for the host, as a
real one would. `StepPublisher` is the visible side: a thread that publishes each complete step
at its deadline. Results do not depend on when they were computed (per-request random streams,
per-row model calls), only their visibility is timed, so compute jitter does not reach the chunk
times as long as the engine keeps ahead on average.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from typing import Callable, Protocol, Sequence

from specsuite.refserver.engine_request import EngineRequest, ProgressMark

StepMarks = Sequence[tuple[EngineRequest, ProgressMark]]
NOTHING_OWED = math.inf


def publish_and_notify(marks: StepMarks) -> None:
    """Publish each request's mark, then wake its HTTP handler."""
    for request, mark in marks:
        request.publish(mark)
        request.notify()


class StepSink(Protocol):
    """Where the engine hands finished steps: a StepPublisher here, or the engine process's sender."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def publish_now(self, marks: StepMarks) -> None: ...

    def schedule(self, deadline: float, marks: StepMarks) -> None: ...


class StepTimeline:
    """Numbered device steps on a clock (engine thread only; no locking)."""

    def __init__(self, step_s: float) -> None:
        self.step_s = step_s
        self._slots: dict[int, list[tuple[EngineRequest, ProgressMark]]] = {}
        self._next_step = 0  # the lowest step not yet complete
        self._origin_step = 0
        self._origin_time = 0.0
        self._owed_from: float = NOTHING_OWED  # the lowest step some running request has not handed in
        self._undue: deque[tuple[int, float]] = deque()  # complete steps whose deadline is ahead
        self._due_through = -1  # the last complete step whose deadline has passed
        self.steps_completed = 0
        self.late = (0, 0.0)  # (steps completed after their deadline, seconds the clock moved for them)

    def join(self, now: float, device_busy: bool) -> int:
        """The first step of a request prefilled at `now`. An idle device starts a new run of
        steps; a busy one keeps its clock."""
        if not device_busy and not self._slots and not self._undue_at(now):
            self._origin_step, self._origin_time = self._next_step, now
        first = self._origin_step + math.ceil((now - self._origin_time) / self.step_s) + 1
        first = max(first, self._next_step)
        self._owed_from = min(self._owed_from, first)
        return first

    def hand_in(self, marks: Sequence[tuple[int, EngineRequest, ProgressMark]], owed_from: float,
                now: float) -> list[tuple[float, list[tuple[EngineRequest, ProgressMark]]]]:
        """Add computed (step, request, mark) results and the lowest step still owed by a running
        request; return the steps this completes, in order, as (deadline, marks)."""
        for step, request, mark in marks:
            self._slots.setdefault(step, []).append((request, mark))
        self._owed_from = owed_from
        completed = []
        while self._slots and self._next_step < self._owed_from:
            step = self._next_step
            self._next_step += 1
            if step not in self._slots:
                continue  # an empty step between runs of requests
            deadline = self._origin_time + (step - self._origin_step + 1) * self.step_s
            if now > deadline:
                self._origin_time += now - deadline
                self.late = (self.late[0] + 1, self.late[1] + now - deadline)
                deadline = now
            self.steps_completed += 1
            self._undue.append((step, deadline))
            completed.append((deadline, self._slots.pop(step)))
        return completed

    def may_compute(self, device_step: int, lead: int, now: float) -> bool:
        """Whether a request's next step is at most `lead` steps past the last due one."""
        self._undue_at(now)
        return device_step <= self._due_through + lead

    def seconds_to_next_deadline(self, now: float) -> float | None:
        return self._undue[0][1] - now if self._undue_at(now) else None

    def _undue_at(self, now: float) -> bool:
        """Drop the steps now due; whether any complete step is still ahead."""
        while self._undue and self._undue[0][1] <= now:
            self._due_through = self._undue.popleft()[0]
        return bool(self._undue)


class StepPublisher:
    """A thread that publishes queued (deadline, marks) in order, each at its deadline."""

    def __init__(self, publish: Callable[[StepMarks], None] = publish_and_notify) -> None:
        self._publish = publish
        self._pending: deque[tuple[float, StepMarks]] = deque()
        self._changed = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="refserver-step-publisher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
        self._thread.join(timeout=5)

    def publish_now(self, marks: StepMarks) -> None:
        """Publish at once, on the caller's thread (a prefill, an abort, or no emulation)."""
        self._publish(marks)

    def schedule(self, deadline: float, marks: StepMarks) -> None:
        """Publish `marks` at `deadline` (time.perf_counter seconds, CLOCK_MONOTONIC on Linux and
        so comparable across processes), after those scheduled before."""
        with self._changed:
            self._pending.append((deadline, marks))
            self._changed.notify_all()

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._pending and not self._stopping:
                    self._changed.wait(timeout=0.5)
                if self._stopping:
                    return
                deadline, marks = self._pending.popleft()
            # No spinning before the deadline: on a 2-core machine the spin's CPU slowed the engine
            # process enough to make it miss deadlines (20x the slips), worse than a late wake-up.
            while (remaining := deadline - time.perf_counter()) > 0:
                time.sleep(remaining)
            self._publish(marks)
