"""A kind of the tests' own, Stubby (tests/helpers/stub_server_kind/), served by the generic code with no generic file
naming it: detection (`--server-kind auto`) finds it by its probe, `make_client` and `kind_of_client` know its client,
its client answers the protocol's typed calls (the native one the integrity suite sends included), the integrity
wiring checks its answers with its own rules (`ServerKind.integrity_rules`, `checking_client`), the serving bench
looks its backend up, speaks its wire and reads its counters, and the behaviour flags resolve. A tiny in-process
HTTP server plays Stubby; no model runs.

What a new kind touches: the 6 files of its folder (`__init__`, `client`, `integrity_rules`, `checking`, `kind`, and
here `server`, the stand-in server a real kind does not need) + 1 line that registers it (here the fixture's
`kinds.register(STUBBY)`; a built-in kind's line is its entry in `specsuite.server.kinds.BUILTIN_KINDS`).
"""

from __future__ import annotations

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import SimpleNamespace

import pytest

from specsuite.config.bench_profiles import SUITE
from specsuite.errors import SpecsuiteError
from specsuite.families.bench.client import RequestOutput, RequestSettings, _StreamState
from specsuite.families.bench.datasets import DatasetRow
from specsuite.families.bench.runner import BenchConfig, run_benchmark
from specsuite.families.integrity.recorder import IntegrityRecorder
from specsuite.families.integrity.wiring import checking_client
from specsuite.server import kinds
from specsuite.server.counters import counter_deltas
from specsuite.server.identity import ServerIdentity
from specsuite.server.protocol import GenerationRequest, NativeGenerationRequest, Sampling, ServerClient
from specsuite.server.served_dtype import served_dtype
from specsuite.server.session import ServerOptions, open_server
from specsuite.session.bench import build_bench_config
from tests.helpers.http_sessions import serve
from tests.helpers.stub_server_kind.client import StubbyClient
from tests.helpers.stub_server_kind.kind import STEPS_COUNTER, STUBBY
from tests.helpers.stub_server_kind.server import MODEL_PATH, TOKENIZER, stubby_server

REPOSITORY = Path(__file__).resolve().parents[2]


@pytest.fixture
def stubby() -> Iterator[kinds.ServerKind]:
    """Stubby registered for one test."""
    kinds.register(STUBBY)  # the one line that makes it a kind
    try:
        yield STUBBY
    finally:
        kinds.unregister(STUBBY.name)


def test_no_generic_file_names_the_kind():
    named = [str(path.relative_to(REPOSITORY)) for path in (REPOSITORY / "specsuite").rglob("*.py") if "stubby" in path.read_text().lower()]
    assert named == []


def test_a_kind_is_what_its_own_module_registers(stubby):
    with stubby_server() as (url, _):
        assert kinds.detect(url) is stubby  # SGLang's and vLLM's probes went first and saw nothing of theirs
        client = kinds.make_client("auto", url)
        assert isinstance(client, StubbyClient) and kinds.kind_of_client(client) is stubby
        assert isinstance(kinds.make_client("stubby", url), StubbyClient)
        assert client.check_connection() == {"model_path": MODEL_PATH}
    assert kinds.choices() == ("auto", "sglang", "vllm", "stubby")
    with pytest.raises(SpecsuiteError, match="'stubby' is taken"):
        kinds.register(stubby)


def test_unregistered_the_server_is_taken_for_the_fallback_kind():
    with stubby_server() as (url, _):
        assert kinds.detect(url) is kinds.fallback()
        with pytest.raises(SpecsuiteError, match="unknown server kind 'stubby': choose one of auto, sglang, vllm"):
            kinds.make_client("stubby", url)


def test_a_server_no_kind_recognises_is_told_what_every_kind_looks_for(stubby, tmp_path):
    class Nothing(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    with serve(Nothing) as url, pytest.raises(SpecsuiteError) as caught:
        open_server(ServerOptions(server_url=url), tmp_path)
    assert ("does not look like an SGLang, vLLM or Stubby server (no vLLM /version with a vLLM model in /v1/models "
            "nor Stubby /stubby/identity either)") in str(caught.value)


def test_the_bench_speaks_its_wire(stubby):
    settings = RequestSettings(backend="stubby-completions", base_url="http://127.0.0.1:1", model="m", temperature=0.7, top_p=0.9)
    assert settings.url == "http://127.0.0.1:1/v1/completions"
    body = settings.wire.body(settings.bench_request(DatasetRow("Hi", 1, 4)))
    assert body == {"model": "m", "stream": True, "temperature": 0.7, "ignore_eos": True, "top_p": 0.9, "prompt": "Hi", "best_of": 1,
                    "max_tokens": 4}  # bench_serving's completions body, sending the flags as the kind says
    state = _StreamState("stubby-completions", RequestOutput(prompt_len=1, start_time=0.0), 4)
    for stamp, text in ((0.1, "a"), (0.3, "b")):
        state.feed({"choices": [{"index": 0, "text": text}]}, stamp)
    state.finish()
    assert state.out.generated_text == "ab" and state.out.itl == [pytest.approx(0.2)]
    config = build_bench_config({}, SUITE, base_url="http://127.0.0.1:1", server_kind="stubby")
    assert config.backend == "stubby-completions" and config.flush_cache is False  # Stubby has no /flush_cache


def test_a_whole_bench_run_reads_its_counters_and_skips_what_it_lacks(stubby, tmp_path):
    with stubby_server() as (url, seen):
        config = BenchConfig(base_url=url, backend="stubby-completions", dataset_name="random-ids", num_prompts=2, random_input_len=4,
                             random_output_len=3, random_range_ratio=1.0, tokenize_prompt=True, max_concurrency=1, flush_cache=True,
                             post_warmup_sleep_s=0.0)
        record = run_benchmark(config, echo=lambda line: None)
    assert record["completed"] == 2 and record["failed"] == 0 and len(seen["bodies"]) == 3  # one warmup, two measured
    assert all(body["model"] == "stubby-model" for body in seen["bodies"])  # the name /v1/models gave
    assert record["accept_length"] == pytest.approx(1 + 8 / 6)  # its /metrics counters over the two measured requests
    assert record["server_info"] is None  # no /server_info asked of it
    assert "--flush-cache skipped: Stubby has no /flush_cache (the accept length is a /metrics delta instead)" in record["warnings"]


def test_generic_lookups_resolve_its_flags_and_counters(stubby):
    found = served_dtype({"server_kind": "stubby"}, {"torch_dtype": "float32"})
    assert (found.name, found.source) == ("bfloat16", "config.json torch_dtype float32: Stubby's auto picks the platform's type; "
                                                      "assumed bfloat16")
    assert served_dtype({}, {"torch_dtype": "float32"}).source.endswith("SGLang's auto serves it in float16")
    assert kinds.all_counters()[-1] == STEPS_COUNTER
    assert counter_deltas(f"{STEPS_COUNTER} 2\n", f"{STEPS_COUNTER} 9\n", kinds.all_counters()) == {STEPS_COUNTER: 7.0}
    assert kinds.kind_of_backend("stubby-completions") is stubby and kinds.bench_backend("stubby-completions").splits_chunk_gaps is False
    assert stubby.answers_over_completions and stubby.seeds_each_request and not stubby.scores_token_ids_logprob


def _server(url: str) -> SimpleNamespace:
    identity = ServerIdentity(base_url=url, model_path=None, tokenizer_path=str(TOKENIZER), served_model_name=None, version=None,
                              random_seed=None, max_running_requests=None, tokenizer_length=None, vocab_size=None,
                              vocab_size_source=None, speculative={}, cuda_graph="", cuda_graph_settings={}, server_args={})
    return SimpleNamespace(client=kinds.make_client("auto", url), identity=identity, vocab=SimpleNamespace(eos_ids=[2]))


def test_its_client_answers_the_protocols_typed_calls(stubby):
    request = GenerationRequest(prompt="Hi", sampling=Sampling(temperature=0, max_new_tokens=2))
    with stubby_server() as (url, seen):
        client = kinds.make_client("auto", url)
        assert isinstance(client, ServerClient)
        assert client.generate_request(request).generation.output_ids == [5, 6]
        reply = client.generate_native(NativeGenerationRequest.batch_of([request, request]))
        assert [answer["output_ids"] for answer in reply.results] == [[5, 6], [5, 6]]
        assert [chunk["index"] for chunk in client.stream_native(NativeGenerationRequest.batch_of([request, request]))] == [0, 1]
    assert seen["generate"][1] == reply.wire and reply.wire["sampling_params"] == [request.sampling.params()] * 2  # per-prompt sampling


def test_the_integrity_rules_are_found_through_the_registry_and_fire_only_on_the_faulty_answer(stubby):
    native = NativeGenerationRequest.one(GenerationRequest(prompt="x", sampling=Sampling(max_new_tokens=2)))
    for claimed, expected in ((2, {}), (3, {"completion_tokens": 1})):
        recorder = IntegrityRecorder()
        with stubby_server(answer_tokens=claimed) as (url, _):
            checked = checking_client(_server(url), recorder)
            assert isinstance(checked, kinds.kind_of_client(checked).checking_client)  # what the integrity plugin asserts
            assert checked.generate_native(native).raw["output_ids"] == [5, 6]
        assert recorder.counts() == expected and recorder.answers_checked == 1
    assert stubby.integrity_rules_path == "tests/helpers/stub_server_kind/integrity_rules.py"
    assert stubby.integrity_rules.check_answer({"output_ids": [1], "meta_info": {"completion_tokens": 1}}) == []
