"""--step-time-ms emulates a device step: a decode step's tokens become visible when the step
ends, never before, and /flush_cache is accepted as soon as the client has seen the finish.

Only lower bounds on time are asserted (a slow machine makes steps longer, never shorter), so
these hold on any CI runner; how close the steps come to the setting is measured by
bench/step_time_ab.py, not here.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from fixtures.refserver.engine import Engine, EngineConfig
from fixtures.refserver.engine_request import EngineRequest
from fixtures.refserver.model_loading import load_reference_model
from fixtures.refserver.protocol import parse_generate

STEP_MS = 20.0


@pytest.fixture(scope="module")
def model():
    return load_reference_model()


def run_one_request(model, step_ms: float, max_new_tokens: int = 24) -> tuple[list[tuple[float, int]], Engine, list[bool]]:
    """Generate with one request; return (time, visible token count) at each notification, the
    engine, and whether /flush_cache would be accepted at the finish notification."""
    engine = Engine(EngineConfig(eos_ids=model.eos_ids, step_time_ms=step_ms), model.target, model.draft, model.decode_text)
    prompt = [int(i) for i in np.random.default_rng(0).integers(0, 8000, 64)]
    items, _, _ = parse_generate({"input_ids": prompt, "sampling_params": {"temperature": 0, "max_new_tokens": max_new_tokens,
                                                                           "ignore_eos": True}}, lambda: "step-emulation")
    item = items[0]
    seen: list[tuple[float, int]] = []
    flush_ok_at_finish: list[bool] = []
    done = threading.Event()
    holder: dict[str, EngineRequest] = {}

    def notify() -> None:
        request = holder["request"]
        seen.append((time.perf_counter(), len(request.output_ids)))
        if request.finish_reason is not None and not done.is_set():
            flush_ok_at_finish.append(engine.flush_spec_statistics())
            done.set()

    request = EngineRequest(item.rid, np.asarray(item.input_ids), item.sampling, item.logprobs, 0, np.random.default_rng(0), notify=notify)
    holder["request"] = request
    engine.start()
    try:
        engine.submit(request)
        assert done.wait(timeout=60), "the request did not finish"
    finally:
        engine.stop()
    return seen, engine, flush_ok_at_finish


def test_decode_results_are_visible_only_at_step_ends(model) -> None:
    seen, _, _ = run_one_request(model, STEP_MS)
    prefill_at = seen[0][0]  # the first token comes from the prefill, which is not padded
    decode_times = [t for t, _ in seen[1:]]
    assert len(decode_times) >= 2
    # Steps run on a clock that starts after the prefill: decode step k ends k steps later.
    for k, at in enumerate(decode_times, start=1):
        elapsed_ms = (at - prefill_at) * 1000.0
        assert elapsed_ms >= k * STEP_MS * 0.999, f"decode step {k}'s tokens were visible after {elapsed_ms:.2f} ms, before {k} steps"
    counts = [n for _, n in seen]
    assert counts == sorted(counts) and counts[-1] == 24


def test_flush_is_accepted_when_the_client_sees_the_finish(model) -> None:
    _, _, flush_ok = run_one_request(model, STEP_MS)
    assert flush_ok == [True], "the finished request was still counted as running when its finish was announced"


def test_without_emulation_the_finish_also_allows_a_flush(model) -> None:
    seen, _, flush_ok = run_one_request(model, 0.0, max_new_tokens=8)
    assert [n for _, n in seen][-1] == 8 and flush_ok == [True]
