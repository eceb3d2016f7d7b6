"""The server-kind registry (specsuite/server/kinds/): the built-in kinds in detection order, and a third kind, Stubby
(tests/helpers/stub_kind.py, one module), that generic code serves without a line of it naming the kind: detection
finds it by its probe, `make_client` builds its client, the integrity wiring checks its answers with its rules, the
serving bench speaks its wire and reads its counters, and the behaviour flags resolve. A tiny stdlib HTTP server plays
Stubby; no model runs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
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
from specsuite.server import kinds, refserver_contract
from specsuite.server.counters import counter_deltas
from specsuite.server.identity import ServerIdentity
from specsuite.server.served_dtype import served_dtype
from specsuite.server.session import ServerOptions, open_server
from specsuite.server.sglang_client import SGLangClient
from specsuite.session.bench import build_bench_config
from specsuite.session.option_table import OPTIONS
from tests.helpers import stub_kind
from tests.helpers.http_sessions import serve

TOKENIZER = Path(__file__).resolve().parents[2] / "specsuite" / "fixtures" / "vllm_models" / "target"


@pytest.fixture
def stubby() -> Iterator[kinds.ServerKind]:
    """Stubby registered for one test."""
    kinds.register(stub_kind.STUBBY)
    try:
        yield stub_kind.STUBBY
    finally:
        kinds.unregister(stub_kind.STUBBY.name)


def _sse(handler: BaseHTTPRequestHandler, events: list[dict]) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.end_headers()  # HTTP/1.0: the stream ends when the connection closes
    for event in events:
        handler.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
    handler.wfile.write(b"data: [DONE]\n\n")


@contextmanager
def stubby_server(answer_tokens: int = 3) -> Iterator[tuple[str, dict]]:
    """Stubby's routes: its identity, its generate (claiming `answer_tokens` for 2 ids), and for the bench
    /v1/models, streamed /v1/completions and /metrics (3 drafts and 4 accepted tokens per request so far)."""
    seen: dict = {"bodies": []}

    class Handler(BaseHTTPRequestHandler):
        def _json(self, body: object, status: int = 200) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(json.dumps(body).encode())

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path == stub_kind.IDENTITY_PATH:
                self._json({"engine": stub_kind.ENGINE, "model_path": "/models/stubby"})
            elif self.path == "/v1/models":
                self._json({"object": "list", "data": [{"id": "stubby-model", "root": str(TOKENIZER)}]})
            elif self.path == "/metrics":
                requests = len(seen["bodies"])
                self.send_response(200)
                self.end_headers()
                self.wfile.write(f"{stub_kind.DRAFTS_COUNTER} {3 * requests}\n{stub_kind.ACCEPTED_COUNTER} {4 * requests}\n"
                                 f"{stub_kind.STEPS_COUNTER} {7 * requests}\n".encode())
            else:
                self._json({"detail": "Not Found"}, 404)

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path == stub_kind.GENERATE_PATH:
                self._json({"text": "ab", "output_ids": [5, 6], "meta_info": {"completion_tokens": answer_tokens}})
            elif self.path == "/v1/completions":
                seen["bodies"].append(body)
                _sse(self, [{"choices": [{"index": 0, "text": text}]} for text in ("a", "b", "c")]
                     + [{"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 3}}])
            else:
                self._json({"detail": "Not Found"}, 404)

        def log_message(self, *args: object) -> None:
            pass

    with serve(Handler) as url:
        yield url, seen


def test_the_built_in_kinds_in_detection_order_and_the_option_choices_are_theirs():
    assert kinds.names() == ("sglang", "vllm") and kinds.fallback() is kinds.get("sglang")
    assert kinds.choices() == ("auto", "sglang", "vllm")
    assert kinds.bench_backend_names() == ("sglang", "sglang-oai", "sglang-oai-chat", "vllm")
    by_flag = {option.flag: option for option in OPTIONS}
    assert by_flag["--server-kind"].choices == kinds.choices()
    assert by_flag["--bench-backend"].choices == by_flag["--backend"].choices == kinds.bench_backend_names()
    assert by_flag["--bench-backend"].default_text == "vllm on a vLLM server, else sglang"
    assert kinds.get(refserver_contract.SERVER_KIND) is kinds.fallback()  # the embedded reference speaks the first kind's API


def test_each_built_in_kind_launches_its_own_server():
    sglang, vllm = kinds.get("sglang").launcher(Path("/venv"), "eagle", port=30001), kinds.get("vllm").launcher("python", "eagle", port=8141)
    assert sglang[1:3] == ["-m", "sglang.launch_server"] and "30001" in sglang
    assert vllm[1:3] == ["-m", "vllm.entrypoints.openai.api_server"] and "8141" in vllm


def test_a_kind_is_what_its_own_module_registers(stubby):
    with stubby_server() as (url, _):
        assert kinds.detect(url) is stubby  # SGLang's and vLLM's probes went first and saw nothing of theirs
        client = kinds.make_client("auto", url)
        assert isinstance(client, stub_kind.StubbyClient) and kinds.kind_of_client(client) is stubby
        assert isinstance(kinds.make_client("stubby", url), stub_kind.StubbyClient)
        assert client.check_connection() == {"model_path": "/models/stubby"}
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


def test_the_integrity_wiring_checks_its_answers_with_its_rules(stubby):
    recorder = IntegrityRecorder()
    with stubby_server(answer_tokens=3) as (url, _):
        identity = ServerIdentity(base_url=url, model_path=None, tokenizer_path=str(TOKENIZER), served_model_name=None, version=None,
                                  random_seed=None, max_running_requests=None, tokenizer_length=None, vocab_size=None,
                                  vocab_size_source=None, speculative={}, cuda_graph="", cuda_graph_settings={}, server_args={})
        server = SimpleNamespace(client=kinds.make_client("auto", url), identity=identity, vocab=SimpleNamespace(eos_ids=[2]))
        checked = checking_client(server, recorder)
        assert isinstance(checked, kinds.kind_of_client(checked).checking_client)  # what the integrity plugin asserts
        assert checked.generate({"text": "x"})["output_ids"] == [5, 6]
    assert recorder.counts() == {"completion_tokens": 1}
    assert stubby.integrity_rules_path == "tests/helpers/stub_kind.py"


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
    assert kinds.all_counters()[-1] == stub_kind.STEPS_COUNTER
    assert counter_deltas(f"{stub_kind.STEPS_COUNTER} 2\n", f"{stub_kind.STEPS_COUNTER} 9\n", kinds.all_counters()) == {stub_kind.STEPS_COUNTER: 7.0}
    assert kinds.kind_of_backend("stubby-completions") is stubby and kinds.bench_backend("stubby-completions").splits_chunk_gaps is False
    assert stubby.answers_over_completions and stubby.seeds_each_request and not stubby.scores_token_ids_logprob


def test_a_kind_may_not_take_a_bench_backend_another_kind_offers():
    copied = replace(stub_kind.STUBBY, name="copycat", bench_backends=kinds.get("vllm").bench_backends)
    with pytest.raises(SpecsuiteError, match="bench backend vllm is taken"):
        kinds.register(copied)
    assert "copycat" not in kinds.names()


def test_a_client_is_of_the_kind_with_its_most_derived_class():
    derived = type("DerivedSGLangClient", (SGLangClient,), {})
    backend = replace(stub_kind.STUBBY.bench_backends[0], name="derived-completions")
    kind = kinds.register(replace(stub_kind.STUBBY, name="derived", client_class=derived, bench_backends=(backend,)))
    try:
        assert kinds.kind_of_client(derived("http://127.0.0.1:1")) is kind
        assert kinds.kind_of_client(SGLangClient("http://127.0.0.1:1")) is kinds.get("sglang")
        assert kinds.kind_of_client(object()) is kinds.fallback()
    finally:
        kinds.unregister("derived")
