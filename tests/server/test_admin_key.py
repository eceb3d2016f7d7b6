"""The admin key: SPECSUITE_ADMIN_API_KEY goes to /flush_cache and nowhere
else, and a flush the server refuses (no admin key, or requests still running) is a warning that
names what it leaves unmeasured, not the end of the run.

Most tests run against the reference server launched with `--api-key` and `--admin-api-key`, which
decides every request as SGLang 0.5.23 does (tests/sglang_contract/test_admin_and_bench.py pins
that): /generate wants the API key, /flush_cache only the admin key.
"""

from __future__ import annotations

import dataclasses
import http.server
import threading
from collections.abc import Iterator

import pytest

from specsuite.families.bench.runner import BenchConfig, run_benchmark
from specsuite.families.correctness.prompts import load_prompts
from specsuite.families.correctness.workload import PROFILES, SamplingCase, run_case
from specsuite.server.faults import ErrorClass, RequestFault
from specsuite.server.kinds.sglang.client import SGLangClient
from specsuite.server.launcher import launch_reference_server
from specsuite.server.vocab import load_vocab_info

API_KEY = "api-key-for-admin-tests-31"
ADMIN_KEY = "admin-key-for-admin-tests-47"


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    server = launch_reference_server("fix", log_dir=tmp_path_factory.mktemp("admin"), ready_timeout_s=120,
                                     extra_args=("--api-key", API_KEY, "--admin-api-key", ADMIN_KEY), api_key=API_KEY)
    yield server
    server.stop()


def test_flush_carries_the_admin_key_and_generation_the_api_key(keyed) -> None:
    with SGLangClient(keyed.base_url, api_key=API_KEY, admin_api_key=ADMIN_KEY) as client:
        assert client.flush_cache() is True
        answer = client.generate({"text": "The sea", "sampling_params": {"max_new_tokens": 4, "temperature": 0}})
        assert answer["meta_info"]["completion_tokens"] == 4


def test_flush_without_the_admin_key_names_the_variable_and_no_key(keyed) -> None:
    with SGLangClient(keyed.base_url, api_key=API_KEY) as client:
        with pytest.raises(RequestFault) as info:
            client.flush_cache()
    message = str(info.value)
    assert info.value.error_class is ErrorClass.HTTP_AUTH and info.value.status == 401
    assert "SPECSUITE_ADMIN_API_KEY" in message and "/flush_cache" in message and "\n" not in message
    assert API_KEY not in message and ADMIN_KEY not in message


def test_a_refused_flush_is_an_outcome_with_the_reason(keyed) -> None:
    from specsuite.server.cache_flush import flush_before_measurement

    with SGLangClient(keyed.base_url, api_key=API_KEY) as client:
        outcome = flush_before_measurement(client, retry_s=5.0)
    assert not outcome.flushed and "SPECSUITE_ADMIN_API_KEY" in (outcome.reason or "")
    warning = outcome.warning("server-wide accept length after flush not measured")
    assert warning.startswith("warning: /flush_cache refused") and warning.endswith("not measured")


def _one_case(url: str, admin_api_key: str | None):
    vocab = load_vocab_info(str(_model_dir()))
    small = dataclasses.replace(PROFILES["smoke"], num_prompts=2, max_new_tokens=256)  # > 40 decode steps: the server folds its average
    with SGLangClient(url, api_key=API_KEY, admin_api_key=admin_api_key) as client:
        return run_case(client, vocab, SamplingCase(0.0, 1.0), load_prompts(None), small)


def _model_dir():
    from specsuite.refserver.model_loading import MODEL_DIR

    return MODEL_DIR


def test_correctness_case_flushes_with_the_admin_key(keyed) -> None:
    result = _one_case(keyed.base_url, ADMIN_KEY)
    assert result.warnings == [] and not result.errors
    assert result.server_accept_length is not None


def test_correctness_case_without_the_admin_key_warns_and_goes_on(keyed) -> None:
    """Before: the 401 on /flush_cache ended the case (and the session) with an error."""
    result = _one_case(keyed.base_url, None)
    assert len(result.generations) == 2 and not result.errors
    assert result.server_accept_length is None  # not this case's alone: not reported
    assert len(result.warnings) == 1
    assert "server-wide accept length after flush not measured" in result.warnings[0]
    assert "SPECSUITE_ADMIN_API_KEY" in result.warnings[0] and ADMIN_KEY not in result.warnings[0]
    assert result.to_dict()["warnings"] == result.warnings


def _bench(url: str, admin_api_key: str | None) -> dict:
    config = BenchConfig(base_url=url, backend="sglang", dataset_name="random-ids", num_prompts=2, random_input_len=32,
                         random_output_len=48, random_range_ratio=1.0, tokenize_prompt=True, max_concurrency=1,
                         flush_cache=True, post_warmup_sleep_s=0.0, seed=1, api_key=API_KEY, admin_api_key=admin_api_key)
    return run_benchmark(config, echo=lambda line: None)


def test_bench_flush_with_the_admin_key(keyed) -> None:
    record = _bench(keyed.base_url, ADMIN_KEY)
    assert record["cache_flushed"] is True and record["warnings"] == []
    assert "admin_api_key" not in record["run"] and ADMIN_KEY not in repr(record)


def test_bench_flush_refused_is_a_warning_and_drops_the_accept_length(keyed) -> None:
    """Before: `specsuite bench --flush-cache` ended with the 401 and saved nothing."""
    record = _bench(keyed.base_url, None)
    assert record["completed"] == 2 and record["failed"] == 0
    assert record["cache_flushed"] is False and record["accept_length"] is None
    assert len(record["warnings"]) == 1 and "accept length after flush not measured" in record["warnings"][0]


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Answers like SGLang's routes the harness calls, and remembers each request's Authorization."""

    seen: list[tuple[str, str | None]] = []
    flush_status = 200

    def _answer(self) -> None:
        self.seen.append((self.path.split("?")[0], self.headers.get("Authorization")))
        status, body = (self.flush_status, b"Cache not flushed.\n") if self.path.startswith("/flush_cache") else (200, b"{}")
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def recorder() -> Iterator[tuple[str, type[_Recorder]]]:
    handler = type("Recorder", (_Recorder,), {"seen": [], "flush_status": 200})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def test_the_admin_key_reaches_only_the_admin_endpoint(recorder) -> None:
    url, handler = recorder
    with SGLangClient(url, api_key=API_KEY, admin_api_key=ADMIN_KEY) as client:
        client.server_info()
        client.flush_cache()
        client.model_info()
    assert handler.seen == [("/server_info", f"Bearer {API_KEY}"), ("/flush_cache", f"Bearer {ADMIN_KEY}"),
                            ("/model_info", f"Bearer {API_KEY}")]


def test_without_an_admin_key_the_flush_carries_the_api_key(recorder) -> None:
    """SGLang's admin routes take the API key when the server has no admin key (srt/utils/auth.py:138-141)."""
    url, handler = recorder
    with SGLangClient(url, api_key=API_KEY) as client:
        client.flush_cache()
    assert handler.seen == [("/flush_cache", f"Bearer {API_KEY}")]


def test_a_flush_refused_with_400_is_retried_then_reported(recorder) -> None:
    from specsuite.server.cache_flush import flush_before_measurement

    url, handler = recorder
    handler.flush_status = 400
    with SGLangClient(url) as client:
        outcome = flush_before_measurement(client, retry_s=0.35)
    assert not outcome.flushed and "HTTP 400" in outcome.reason and "requests running or waiting" in outcome.reason
    assert len(handler.seen) >= 3  # retried, not given up at once


def test_gsm8k_without_the_admin_key_warns_and_goes_on(keyed) -> None:
    """Before: the 401 on /flush_cache ended the GSM8K run before its first question."""
    from specsuite.families.gsm8k import load_gsm8k
    from specsuite.families.gsm8k.on_server import run_gsm8k_on_server

    vocab = load_vocab_info(str(_model_dir()))
    with SGLangClient(keyed.base_url, api_key=API_KEY) as client:
        result = run_gsm8k_on_server(client, vocab, load_gsm8k("synthetic"), temperature=0.0, num_questions=2, num_shots=1,
                                     parallel=2)
    assert result["n_answered"] == 2 and result["accept_length"]["server"] is None
    assert len(result["warnings"]) == 1 and "GSM8K t=0" in result["warnings"][0]
    assert "server-wide accept length after flush not measured" in result["warnings"][0]
