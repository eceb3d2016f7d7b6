"""The emulated device clock's bookkeeping (StepTimeline), with made-up times: which step a
request joins, when a step is complete, what deadline it gets, and how far the engine may run
ahead."""

from __future__ import annotations

import time

import numpy as np
import pytest

from specsuite.refserver.engine_request import EngineRequest, LogprobConfig, SamplingConfig
from specsuite.refserver.step_clock import NOTHING_OWED, StepPublisher, StepTimeline

STEP = 0.010


def request(name: str) -> EngineRequest:
    return EngineRequest(name, np.array([1, 2, 3]), SamplingConfig(), LogprobConfig(), 0, np.random.default_rng(0))


def hand_in_one(timeline: StepTimeline, step: int, who: EngineRequest, owed_from: float, now: float):
    return timeline.hand_in([(step, who, who.mark())], owed_from, now)


def test_an_idle_device_starts_a_run_and_steps_end_on_the_clock() -> None:
    timeline, a = StepTimeline(STEP), request("a")
    first = timeline.join(now=100.0, device_busy=False)
    assert first == 1  # one step to take the request in
    deadlines = []
    for k in range(first, first + 5):  # computed well ahead of each deadline
        completed = hand_in_one(timeline, k, a, owed_from=k + 1, now=100.0 + 0.001 * k)
        deadlines += [d for d, _ in completed]
    assert deadlines == pytest.approx([100.0 + STEP * (k + 1) for k in range(1, 6)])


def test_a_step_completed_late_moves_the_clock_by_the_delay() -> None:
    timeline, a = StepTimeline(STEP), request("a")
    first = timeline.join(now=0.0, device_busy=False)
    (on_time, _), = hand_in_one(timeline, first, a, owed_from=first + 1, now=0.001)
    (late, _), = hand_in_one(timeline, first + 1, a, owed_from=first + 2, now=on_time + STEP + 0.004)
    (after, _), = hand_in_one(timeline, first + 2, a, owed_from=first + 3, now=late)
    assert late == pytest.approx(on_time + STEP + 0.004)  # the device waited 4 ms for the host
    assert after - late == pytest.approx(STEP)  # and runs a full step after that
    assert timeline.late == (1, pytest.approx(0.004)) and timeline.steps_completed == 3


def test_a_step_is_complete_only_when_every_running_request_handed_in() -> None:
    timeline, a, b = StepTimeline(STEP), request("a"), request("b")
    first = timeline.join(now=0.0, device_busy=False)
    assert timeline.join(now=0.0, device_busy=True) == first
    assert hand_in_one(timeline, first, a, owed_from=first, now=0.001) == []  # b still owes this step
    completed = hand_in_one(timeline, first, b, owed_from=first + 1, now=0.002)
    assert len(completed) == 1 and [r.rid for r, _ in completed[0][1]] == ["a", "b"]


def test_a_busy_device_takes_a_newcomer_one_step_after_the_next_boundary() -> None:
    timeline, a = StepTimeline(STEP), request("a")
    first = timeline.join(now=0.0, device_busy=False)
    for k in range(first, first + 3):
        hand_in_one(timeline, k, a, owed_from=k + 1, now=0.0)
    # At 25 ms step 2 (20-30 ms) is on the device; step 3 starts next, so the newcomer is in step 4.
    assert timeline.join(now=0.025, device_busy=True) == 4


def test_the_engine_may_run_ahead_by_the_lead_and_no_further() -> None:
    timeline, a = StepTimeline(STEP), request("a")
    first = timeline.join(now=0.0, device_busy=False)
    lead = 3
    step = first
    while timeline.may_compute(step, lead, now=0.0):
        hand_in_one(timeline, step, a, owed_from=step + 1, now=0.0)
        step += 1
    assert step == lead  # nothing is due yet: steps up to the lead, then wait
    assert timeline.seconds_to_next_deadline(now=0.0) == pytest.approx(2 * STEP)
    assert timeline.may_compute(step, lead, now=2 * STEP)  # step 1 is due: up to step 4
    assert timeline.may_compute(step + 1, lead, now=2 * STEP)
    assert not timeline.may_compute(step + 2, lead, now=2 * STEP)


def test_a_finished_run_leaves_the_device_idle_for_the_next_request() -> None:
    timeline, a, b = StepTimeline(STEP), request("a"), request("b")
    first = timeline.join(now=0.0, device_busy=False)
    hand_in_one(timeline, first, a, owed_from=NOTHING_OWED, now=0.0)  # a finishes in its first step
    assert timeline.join(now=0.005, device_busy=False) == first + 1  # its step is not due: still busy
    later = StepTimeline(STEP)
    later.join(now=0.0, device_busy=False)
    hand_in_one(later, 1, a, owed_from=NOTHING_OWED, now=0.0)
    nxt = later.join(now=1.0, device_busy=False)  # long after: a new run from 1.0
    (deadline, _), = hand_in_one(later, nxt, b, owed_from=NOTHING_OWED, now=1.0)
    assert deadline == pytest.approx(1.0 + 2 * STEP)


def test_the_publisher_publishes_in_order_and_not_before_each_deadline() -> None:
    seen: list[tuple[float, str]] = []
    publisher = StepPublisher(publish=lambda marks: seen.append((time.perf_counter(), marks[0][0].rid)))
    publisher.start()
    try:
        start = time.perf_counter()
        deadlines = [start + 0.02, start + 0.04, start + 0.06]
        for deadline, name in zip(deadlines, "abc", strict=False):
            who = request(name)
            publisher.schedule(deadline, [(who, who.mark())])
        time.sleep(0.2)
    finally:
        publisher.stop()
    assert [name for _, name in seen] == ["a", "b", "c"]
    assert all(at >= deadline for (at, _), deadline in zip(seen, deadlines, strict=False))
