"""Each fault on the vLLM path is flagged by the check that owns it, and the clean proxy passes.

One vLLM server with EAGLE (the project's tiny models, `specsuite.server.kinds.vllm.launch`) runs behind
`tests/helpers/fault_proxy.py`; the harness reaches it through the proxy exactly as a suite does
(`open_server` detects vLLM, `VLLMClient` speaks /v1/completions, `CheckingVLLMClient` runs the vLLM
integrity rules on the raw answers). For every fault, the same request is sent with the proxy
passing answers through (the owning check is clean), then with the fault (the check fires, and
the proxy's `mutations` proves it applied the fault):

| fault                   | flagged by                                                   |
|-------------------------|--------------------------------------------------------------|
| `padded_id`             | correctness detectors `padded_row_id` / `invalid_id` (and, end to end, `test_padded_row_ids_within_model_mass`) |
| `accept_inflate`        | integrity `spec_counts` (the token count; the stats agree with each other) |
| `eos_tail`              | integrity `stop_token` (after EOS, and after a stop id)      |
| `completion_off_by_one` | integrity `completion_tokens`                                |
| `swap_chunks`           | integrity stream reassembly (stream vs non-stream, `stream_problems`; end to end, `test_stream_reassembles_at_greedy`) |

Only greedy requests are sent: this vLLM build emits padded ids for any request with temperature
> 0 under speculation and corrupts greedy requests running beside it
(docs/findings/vllm-spec-padded-ids.md), which would make the clean proxy fail.

Needs vLLM: without it (`find_vllm_python` fails; CI's vLLM job sets SPECSUITE_VLLM_PYTHON) the
module is skipped with the reason. The server starts in 1-5 minutes on a loaded 2-core machine.
SPECSUITE_VLLM_FAULTS_UPSTREAM=URL reuses a running vLLM (EAGLE, the project's models) instead.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from specsuite.errors import SpecsuiteError
from specsuite.families.correctness.detectors import scan_generation
from specsuite.families.integrity.recorder import IntegrityRecorder
from specsuite.families.integrity.wiring import checking_client
from specsuite.pytest_plugin.integrity import REPETITIVE_PROMPTS, greedy_payload, stream_problems
from specsuite.server.generation import Generation, generations_from_sglang
from specsuite.server.kinds.vllm.launch import find_vllm_python, vllm_command, vllm_env
from specsuite.server.launcher import LaunchedServer, find_free_port
from specsuite.server.native_answers import stream_finals
from specsuite.server.session import ServerOptions, open_server
from tests.helpers.fault_proxy import FaultProxy

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PROMPT = REPETITIVE_PROMPTS[1]  # "Count from one to forty in words: ..."
EOS_PROMPT = "Did Mr. Orton accept a curtain?"  # greedy, the tiny target ends its answer with EOS after about 11 ids
UPSTREAM_ENV = "SPECSUITE_VLLM_FAULTS_UPSTREAM"
@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    """The vLLM server's base URL: one EAGLE server of this module's own."""
    if os.environ.get(UPSTREAM_ENV):
        yield os.environ[UPSTREAM_ENV].rstrip("/")
        return
    try:
        python = find_vllm_python()
    except SpecsuiteError as exc:
        pytest.skip(str(exc))
    port = find_free_port()
    log = tmp_path_factory.mktemp("vllm-faults") / "vllm.log"
    with LaunchedServer(vllm_command(python, "eagle", port=port), base_url=f"http://127.0.0.1:{port}", log_path=log,
                        env=vllm_env(), cwd=ROOT, ready_timeout_s=900) as server:
        yield server.base_url


@pytest.fixture(scope="module")
def proxy(upstream):
    with FaultProxy(upstream) as running:
        yield running


@pytest.fixture(scope="module")
def session(proxy, tmp_path_factory):
    """(server, client, recorder): the harness's view of vLLM through the proxy, checked."""
    server = open_server(ServerOptions(server_url=proxy.url), tmp_path_factory.mktemp("vllm-faults-log"))
    assert server.client.kind == "vllm", "the proxy must pass vLLM's identity through"
    recorder = IntegrityRecorder()
    yield server, checking_client(server, recorder), recorder
    server.close()


@pytest.fixture(scope="module")
def reference(session):
    """A greedy answer to PROMPT: its ids pick a stop id that is sure to match."""
    _, client, _ = session
    return client.generate(greedy_payload(PROMPT, 40))


def answer(client, payload: dict, mode: str) -> dict:
    """The native answer to `payload`, non-streamed or what its stream adds up to."""
    if mode == "stream":
        return stream_finals(payload, list(client.generate_stream(payload)))[0]
    return client.generate(payload)


def payload_for(finish: str, reference: dict) -> dict:
    """Greedy, finished by EOS, by a stop id (`eos_tail` needs either), or by the length cap."""
    if finish == "eos":
        return greedy_payload(EOS_PROMPT, 40)
    if finish == "stop_id":
        return greedy_payload(PROMPT, 40, stop_token_ids=[reference["output_ids"][12]])
    return greedy_payload(PROMPT, 32)


INTEGRITY_FAULTS = [
    ("accept_inflate", "spec_counts", "length"),
    ("eos_tail", "stop_token", "eos"),
    ("eos_tail", "stop_token", "stop_id"),
    ("completion_off_by_one", "completion_tokens", "length"),
]


@pytest.mark.parametrize("mode", ["plain", "stream"])
@pytest.mark.parametrize("fault_name, check, finish", INTEGRITY_FAULTS, ids=[f"{f}-{e}" for f, _, e in INTEGRITY_FAULTS])
def test_integrity_fault_fires_its_check(session, reference, proxy, fault, fault_name, check, finish, mode):
    server, client, recorder = session
    payload = payload_for(finish, reference)
    mark = recorder.checkpoint()
    clean = answer(client, payload, mode)
    assert recorder.since(mark) == [], "the clean proxy must pass: " + recorder.summary(mark)
    ended = clean["meta_info"]["finish_reason"]
    if finish == "eos":
        assert ended["type"] == "stop" and ended["matched"] in server.vocab.eos_ids, f"{EOS_PROMPT!r} no longer ends on EOS: {ended}"
    elif finish == "stop_id":
        assert ended == {"type": "stop", "matched": payload["sampling_params"]["stop_token_ids"][0]}, ended
    fault(fault_name)
    answer(client, payload, mode)
    assert proxy.mutations == 1, f"the proxy did not apply {fault_name}"
    fired = recorder.counts(mark)
    assert fired.get(check, 0) >= 1, f"{fault_name} should fire {check}; fired {fired}"
    # kept consistent everywhere else, so only the owner sees it (after EOS, the finish's claim that
    # the answer ended on EOS is broken as well: the last id is no longer EOS)
    if fault_name == "accept_inflate" or (fault_name, finish) == ("eos_tail", "stop_id"):
        assert set(fired) == {check}, recorder.summary(mark)
    elif (fault_name, finish) == ("eos_tail", "eos"):
        assert set(fired) == {check, "finish_reason"}, recorder.summary(mark)


def _id_hits(server, payload: dict, native: dict) -> dict[str, int]:
    (generation,) = generations_from_sglang(payload, native) if isinstance(native, list) else [Generation.from_sglang(payload, native)]
    results = scan_generation(generation, server.vocab).results
    return {name: results[name].count for name in ("padded_row_id", "invalid_id", "token_source_mismatch")}


@pytest.mark.parametrize("mode", ["plain", "stream"])
def test_padded_id_is_flagged_by_the_correctness_detectors(session, proxy, fault, mode):
    """The padded id is named in the logprobs too: the id detectors see it, the id/logprob
    alignment (and every integrity rule) does not."""
    server, client, recorder = session
    assert server.vocab.tokenizer_length <= proxy.padded_id < server.vocab.vocab_size
    payload = greedy_payload(PROMPT, 32)
    mark = recorder.checkpoint()
    assert _id_hits(server, payload, answer(client, payload, mode)) == {"padded_row_id": 0, "invalid_id": 0, "token_source_mismatch": 0}
    fault("padded_id")
    hits = _id_hits(server, payload, answer(client, payload, mode))
    assert proxy.mutations == 1
    assert hits == {"padded_row_id": 1, "invalid_id": 1, "token_source_mismatch": 0}, hits
    assert recorder.since(mark) == [], recorder.summary(mark)


def test_swapped_chunks_break_stream_reassembly(session, proxy, fault):
    """Swapped chunks keep every count (the stream rules pass); the suite's stream-vs-non-stream
    comparison (test_stream_reassembles_at_greedy) finds them."""
    _, client, recorder = session
    payload = greedy_payload(PROMPT, 96)
    mark = recorder.checkpoint()
    plain = client.generate(payload)
    assert stream_problems(plain, answer(client, payload, "stream")) == []
    fault("swap_chunks")
    problems = stream_problems(plain, answer(client, payload, "stream"))
    assert proxy.mutations == 1
    assert any("output_ids differ" in p for p in problems) and any("text differs" in p for p in problems), problems
    assert recorder.since(mark) == [], recorder.summary(mark)


def test_integrity_suite_fails_on_swapped_chunks_end_to_end(proxy, fault, tmp_path):
    """End to end: the integrity suite's test_stream_reassembles_at_greedy through the proxy passes
    clean and fails with swapped chunks."""
    args = ("suites/test_integrity.py", "-p", "specsuite.pytest_plugin.integrity", "-k", "stream_reassembles_at_greedy")
    broken = _clean_then_broken(proxy, fault, "swap_chunks", tmp_path, *args)
    assert "FAILED suites/test_integrity.py::test_stream_reassembles_at_greedy" in broken.stdout, broken.stdout[-3000:]
    assert "stream vs non-stream: output_ids differ" in broken.stdout


def _suite(proxy_url: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", *args, "-q", "-p", "no:cacheprovider", "--server-url", proxy_url, "--results-dir", str(tmp_path)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("SPECSUITE_SERVER_URL", None)
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


def _clean_then_broken(proxy, fault, name: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The suite through the proxy: it passes clean, then fails (exit 1) once `name` is applied."""
    clean = _suite(proxy.url, tmp_path / "clean", *args)
    assert clean.returncode == 0, clean.stdout[-3000:] + clean.stderr[-2000:]
    fault(name)
    broken = _suite(proxy.url, tmp_path / name, *args)
    assert proxy.mutations >= 1
    assert broken.returncode == 1, broken.stdout[-3000:] + broken.stderr[-2000:]
    return broken


def test_correctness_suite_fails_on_padded_ids_end_to_end(proxy, fault, tmp_path):
    """End to end: `pytest suites -m correctness --temperatures 0` through the proxy passes clean
    and fails test_padded_row_ids_within_model_mass with the padded-id fault."""
    broken = _clean_then_broken(proxy, fault, "padded_id", tmp_path, "suites", "-m", "correctness", "--temperatures", "0")
    failed = [line for line in broken.stdout.splitlines() if line.startswith("FAILED")]
    assert any("test_padded_row_ids_within_model_mass" in line for line in failed), "\n".join(failed) or broken.stdout[-3000:]
