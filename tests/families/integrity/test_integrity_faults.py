"""Each integrity check fires when its fault is injected.

The reference server (fix arm) runs behind `tests/helpers/fault_proxy.py`. For every check, the
same request is sent twice through the checked client: with the proxy passing answers through (no
violation), then with the one fault aimed at that check (the check fires, and the proxy confirms it
applied the fault). Suite-level checks (canary leaks, stream vs non-stream, seeds) are run through
the same functions the suite uses, and one end-to-end run puts the proxy between the integrity
suite itself and the server.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from specsuite.families.integrity.comparisons import compare_answers, find_canary_leaks, make_canaries
from specsuite.families.integrity.recorder import IntegrityRecorder
from specsuite.families.integrity.wiring import checking_client
from specsuite.server.launcher import launch_reference_server
from specsuite.server.native_answers import stream_finals
from specsuite.server.session import ServerOptions, open_server
from tests.helpers.fault_proxy import FaultProxy

ROOT = Path(__file__).resolve().parents[3]
PROMPT = "Count from one to forty in words: one, two, three, four, five, six,"
OTHER_PROMPTS = ["Did Mr. Orton accept a curtain?", "<|user|>\nWhat is Crowham like?\n<|assistant|>\n<think>\n",
                 "Their quiet teacher was quite marvelous. He kept a cold neighbor around Marshcliff."]


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    with launch_reference_server("fix", tmp_path_factory.mktemp("integrity-faults"), ready_timeout_s=60) as server:
        yield server


@pytest.fixture(scope="module")
def proxy(upstream):
    with FaultProxy(upstream.base_url) as running:
        yield running


@pytest.fixture(scope="module")
def checked(proxy, tmp_path_factory):
    """(client, recorder): the checked client, reaching the server through the proxy."""
    server = open_server(ServerOptions(server_url=proxy.url), tmp_path_factory.mktemp("integrity-faults-log"))
    recorder = IntegrityRecorder()
    yield checking_client(server, recorder), recorder
    server.close()


@pytest.fixture(scope="module")
def reference(checked):
    """A greedy answer to PROMPT: its ids pick stop ids and stop strings that are sure to match."""
    client, _ = checked
    return client.generate(greedy(40))


def greedy(max_new_tokens: int, **params) -> dict:
    return {"text": PROMPT, "sampling_params": {"temperature": 0, "max_new_tokens": max_new_tokens, **params}, "return_logprob": True}


def payload_for(check: str, reference: dict) -> dict:
    """A request whose answer qualifies for the fault aimed at `check`."""
    ids, text = reference["output_ids"], reference["text"]
    if check == "stop_token":
        return greedy(40, stop_token_ids=[ids[9]])
    if check == "stop_string":
        return greedy(40, stop=[text[20:26]])
    return greedy(24)


def send(client, payload: dict, mode: str) -> None:
    if mode == "stream":
        list(client.generate_stream(payload))
    else:
        client.generate(payload)


ANSWER_FAULTS = [
    ("eos_tail", "stop_token"),
    ("overshoot", "max_new_tokens"),
    ("completion_off_by_one", "completion_tokens"),
    ("drop_logprob", "logprob_alignment"),
    ("junk_text", "retokenize"),
    ("keep_stop", "stop_string"),
    ("bad_length", "finish_reason"),
    ("accept_overflow", "spec_counts"),
]


@pytest.mark.parametrize("mode", ["plain", "stream"])
@pytest.mark.parametrize("fault_name, check", ANSWER_FAULTS, ids=[f for f, _ in ANSWER_FAULTS])
def test_answer_fault_fires_its_check(checked, reference, proxy, fault, fault_name, check, mode):
    client, recorder = checked
    payload = payload_for(check, reference)
    mark = recorder.checkpoint()
    send(client, payload, mode)
    assert recorder.since(mark) == [], "control (no fault) must pass: " + recorder.summary(mark)
    fault(fault_name)
    send(client, payload, mode)
    assert proxy.mutations == 1, f"the proxy did not apply {fault_name}"
    fired = recorder.counts(mark)
    assert fired.get(check, 0) >= 1, f"{fault_name} should fire {check}; fired {fired}"


@pytest.mark.parametrize("fault_name, check", [("swap_chunks", "stream_cumulative"), ("early_finish", "stream_finish")])
def test_stream_fault_fires_its_check(checked, proxy, fault, fault_name, check):
    client, recorder = checked
    payload = greedy(48)
    mark = recorder.checkpoint()
    list(client.generate_stream(payload))
    assert recorder.since(mark) == [], recorder.summary(mark)
    fault(fault_name)
    list(client.generate_stream(payload))
    assert proxy.mutations == 1
    # Under load a stream can come in three chunks, so the swapped third is the final one and the finish checks fire
    # too: the fault's own check must fire, whatever else its swap broke.
    assert check in set(recorder.counts(mark)), recorder.summary(mark)


def test_swapped_chunks_are_caught_in_a_batch_stream(checked, proxy, fault):
    client, recorder = checked
    batch = {"text": [PROMPT, *OTHER_PROMPTS], "sampling_params": {"temperature": 0, "max_new_tokens": 32}}
    mark = recorder.checkpoint()
    list(client.generate_stream(batch))
    assert recorder.since(mark) == []
    fault("swap_chunks")
    list(client.generate_stream(batch))
    assert proxy.mutations == 1 and recorder.counts(mark) == {"stream_cumulative": 1}, recorder.summary(mark)


def test_leaked_canary_is_found(checked, proxy, fault):
    client, recorder = checked
    canaries = make_canaries(4, seed=0)
    batch = {"text": [f"Remember the code {c}. {p}" for c, p in zip(canaries, [PROMPT, *OTHER_PROMPTS], strict=False)],
             "sampling_params": {"temperature": 0, "max_new_tokens": 24}}
    assert find_canary_leaks(canaries, [a["text"] for a in client.generate(batch)]) == []
    fault("leak_canary")
    leaks = find_canary_leaks(canaries, [a["text"] for a in client.generate(batch)])
    assert proxy.mutations == 1
    assert [(leak.owner, leak.found_in) for leak in leaks] == [(0, 1)]


def test_stream_that_differs_from_non_stream_is_found(checked, proxy, fault):
    client, recorder = checked
    payload = greedy(32)
    plain = client.generate(payload)
    assert compare_answers(plain, stream_finals(payload, list(client.generate_stream(payload)))[0]) == []
    fault("stream_tail_junk")
    differences = compare_answers(plain, stream_finals(payload, list(client.generate_stream(payload)))[0])
    assert proxy.mutations == 1
    assert len(differences) == 1 and differences[0].startswith("text differs at char")


def seeded(seed: int) -> dict:
    return {"text": PROMPT, "sampling_params": {"temperature": 1.0, "max_new_tokens": 32, "sampling_seed": seed, "ignore_eos": True}}


def test_ignored_seed_breaks_seeded_determinism(checked, proxy, fault):
    client, _ = checked
    assert compare_answers(client.generate(seeded(5)), client.generate(seeded(5))) == []
    fault("drop_seed")
    first, second = client.generate(seeded(5)), client.generate(seeded(5))
    assert proxy.mutations == 2
    assert compare_answers(first, second) != []


def test_mixed_up_seeds_give_equal_outputs(checked, proxy, fault):
    client, _ = checked
    assert client.generate(seeded(5))["output_ids"] != client.generate(seeded(6))["output_ids"]
    fault("pin_seed")
    assert client.generate(seeded(5))["output_ids"] == client.generate(seeded(6))["output_ids"]
    assert proxy.mutations == 2


@pytest.mark.slow  # a pytest subprocess: about 15 s, mostly start-up
def test_the_suite_fails_through_a_leaking_proxy(proxy, fault, tmp_path):
    """End to end: the integrity suite, pointed at the proxy, fails its isolation test on the leak."""
    fault("leak_canary")
    command = [sys.executable, "-m", "pytest", "suites/test_integrity.py", "-p", "specsuite.pytest_plugin.integrity", "-q", "-p", "no:cacheprovider",
               "--server-url", proxy.url, "--results-dir", str(tmp_path), "-k", "batch_isolation", "--integrity-batch-size", "8"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("SPECSUITE_SERVER_URL", None)
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    assert "of request 0 appears in the output of request 1" in result.stdout
    assert proxy.mutations >= 1
