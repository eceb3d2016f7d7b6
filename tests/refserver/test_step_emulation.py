"""--step-time-ms emulates a device step: a decode step's tokens become visible when the step
ends, never before, and /flush_cache is accepted as soon as the client has seen the finish; the
same through the engine in its own process (what the server runs with emulation), where aborts
and counters also cross the process boundary.

Only lower bounds on time are asserted (a slow machine makes steps longer, never shorter), so
these hold on any CI runner; how close the steps come to the setting is measured by
tools/calibration/step_time_ab.py, not here.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.request

import numpy as np
import pytest

from specsuite.refserver.engine import Engine, EngineConfig
from specsuite.refserver.engine_process import EngineProcess
from specsuite.refserver.engine_request import EngineRequest
from specsuite.refserver.model_loading import load_reference_model
from specsuite.refserver.protocol import parse_generate
from specsuite.server.counters import parse_prometheus
from specsuite.server.launcher import launch_reference_server

STEP_MS = 20.0


@pytest.fixture(scope="module")
def model():
    return load_reference_model()


ENGINE_TYPES = [pytest.param(Engine, id="thread"), pytest.param(EngineProcess, id="process")]


def generate_request(rid: str, max_new_tokens: int, notify) -> EngineRequest:
    prompt = [int(i) for i in np.random.default_rng(0).integers(0, 8000, 64)]
    items, _, _ = parse_generate({"input_ids": prompt, "sampling_params": {"temperature": 0, "max_new_tokens": max_new_tokens,
                                                                           "ignore_eos": True}}, lambda: rid)
    item = items[0]
    return EngineRequest(item.rid, np.asarray(item.input_ids), item.sampling, item.logprobs, 0, np.random.default_rng(0), notify=notify)


def run_one_request(model, step_ms: float, max_new_tokens: int = 24, engine_type=Engine) -> tuple[list[tuple[float, int]], Engine, list[bool]]:
    """Generate with one request; return (time, visible token count) at each notification, the
    engine, and whether /flush_cache would be accepted at the finish notification."""
    engine = engine_type(EngineConfig(eos_ids=model.eos_ids, step_time_ms=step_ms), model.target, model.draft, model.decode_text)
    seen: list[tuple[float, int]] = []
    verifies: list[int] = []  # the published verify count at each notification
    flush_ok_at_finish: list[bool] = []
    done = threading.Event()
    holder: dict[str, EngineRequest] = {}

    def notify() -> None:
        request = holder["request"]
        seen.append((time.perf_counter(), len(request.output_ids)))
        verifies.append(request.verify_ct)
        if request.finish_reason is not None and not done.is_set():
            flush_ok_at_finish.append(engine.flush_spec_statistics())
            done.set()

    request = generate_request("step-emulation", max_new_tokens, notify)
    holder["request"] = request
    engine.start()
    try:
        engine.submit(request)
        assert done.wait(timeout=60), "the request did not finish"
    finally:
        engine.stop()
    # The engine computes ahead; what is visible must never run ahead of the published steps:
    # the prefill's token plus at most num_draft_tokens per published verify.
    width = engine.config.num_draft_tokens
    assert all(n <= 1 + width * v for (_, n), v in zip(seen, verifies, strict=False)), f"tokens visible ahead of their steps: {seen}, {verifies}"
    return seen, engine, flush_ok_at_finish


@pytest.mark.parametrize("engine_type", ENGINE_TYPES)
def test_decode_results_are_visible_only_at_step_ends(model, engine_type) -> None:
    seen, _, _ = run_one_request(model, STEP_MS, engine_type=engine_type)
    prefill_at = seen[0][0]  # the first token comes from the prefill, which is not padded
    decode_times = [t for t, _ in seen[1:]]
    assert len(decode_times) >= 2
    # Steps run on a clock that starts after the prefill: decode step k ends k steps later.
    for k, at in enumerate(decode_times, start=1):
        elapsed_ms = (at - prefill_at) * 1000.0
        assert elapsed_ms >= k * STEP_MS * 0.999, f"decode step {k}'s tokens were visible after {elapsed_ms:.2f} ms, before {k} steps"
    counts = [n for _, n in seen]
    assert counts == sorted(counts) and counts[-1] == 24


@pytest.mark.parametrize("engine_type", ENGINE_TYPES)
def test_flush_is_accepted_when_the_client_sees_the_finish(model, engine_type) -> None:
    _, _, flush_ok = run_one_request(model, STEP_MS, engine_type=engine_type)
    assert flush_ok == [True], "the finished request was still counted as running when its finish was announced"


def test_without_emulation_the_finish_also_allows_a_flush(model) -> None:
    seen, _, flush_ok = run_one_request(model, 0.0, max_new_tokens=8)
    assert [n for _, n in seen][-1] == 8 and flush_ok == [True]


def test_the_engine_process_reports_counters_and_outputs_like_the_thread(model) -> None:
    seen_thread, thread_engine, _ = run_one_request(model, STEP_MS, max_new_tokens=16)
    seen_process, process_engine, _ = run_one_request(model, STEP_MS, max_new_tokens=16, engine_type=EngineProcess)
    assert [n for _, n in seen_process] == [n for _, n in seen_thread]  # the same steps, published alike
    assert process_engine.counters.generation_tokens == thread_engine.counters.generation_tokens == 16
    assert process_engine.counters.verify_calls == thread_engine.counters.verify_calls > 0


def test_an_abort_reaches_the_engine_process(model) -> None:
    engine = EngineProcess(EngineConfig(eos_ids=model.eos_ids, step_time_ms=STEP_MS), model.target, model.draft, model.decode_text)
    first_chunk, finished = threading.Event(), threading.Event()
    holder: dict[str, EngineRequest] = {}

    def notify() -> None:
        first_chunk.set()
        if holder["request"].finish_reason is not None:
            finished.set()

    request = holder["request"] = generate_request("to-abort", 2000, notify)
    engine.start()
    try:
        engine.submit(request)
        assert first_chunk.wait(timeout=60), "no first token"
        engine.abort(request)
        assert finished.wait(timeout=30), "the aborted request never finished"
        assert request.finish_reason["type"] == "abort" and len(request.output_ids) < 2000
        assert engine.counters.requests_aborted == 1 and engine.queue_lengths() == (0, 0)
    finally:
        engine.stop()
    assert not engine.is_alive()


def test_the_engine_process_exits_when_the_http_process_goes_away(model) -> None:
    engine = EngineProcess(EngineConfig(eos_ids=model.eos_ids, step_time_ms=STEP_MS), model.target, model.draft, model.decode_text)
    engine.start()
    try:
        engine._commands.close()  # what the HTTP process's death does to the command pipe
        engine._child.join(timeout=20)
        assert not engine._child.is_alive(), "the engine process outlived its HTTP process"
    finally:
        engine._child.kill()
        engine._publisher.stop()


def test_the_server_with_step_emulation_serves_over_http_and_stops_whole(tmp_path) -> None:
    """The real server with --step-time-ms: the engine runs in a child process, results come back
    on the clock, the clock counters reach /metrics, and stopping leaves no process behind."""
    body = json.dumps({"input_ids": list(range(100, 164)), "sampling_params": {"temperature": 0, "max_new_tokens": 32, "ignore_eos": True}})
    with launch_reference_server("fix", tmp_path, extra_args=["--step-time-ms", "5", "--enable-metrics"]) as server:
        request = urllib.request.Request(f"{server.base_url}/generate", data=body.encode(), headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            meta = json.loads(response.read())["meta_info"]
        assert meta["completion_tokens"] == 32
        # Prefill, one step to take the request in, then one step per verify: a lower bound.
        assert meta["e2e_latency"] >= (meta["spec_verify_ct"] + 1) * 0.005 * 0.999
        with urllib.request.urlopen(f"{server.base_url}/flush_cache", timeout=10) as response:
            assert response.status == 200
        with urllib.request.urlopen(f"{server.base_url}/metrics", timeout=10) as response:
            metrics = parse_prometheus(response.read().decode())
        assert metrics["specsuite_refserver:emulated_steps_total"] >= meta["spec_verify_ct"]
        assert metrics["sglang:generation_tokens_total"] >= 32
        group = server.pid
    with pytest.raises(ProcessLookupError):
        os.killpg(group, 0)
