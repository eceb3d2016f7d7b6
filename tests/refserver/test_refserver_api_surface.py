"""The reference server's API surface as SGLang 0.5.23's: /health runs a
generation, n > 1 on a batch, the sampling keys SGLang admits and refuses, aborted items in a
batch, and the per-chunk token ids and logprobs of a /v1/completions stream.

Each test names the SGLang source it follows (paths relative to the `sglang/` package). One
server with the recycled-draft_probs bug's speculative configuration serves most tests; the health-failure and abort
tests use a second one whose engine runs in its own process on a step clock, so it can be paused.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import requests

from specsuite.server.counters import parse_prometheus
from specsuite.server.launcher import launch_reference_server
from tests.helpers.http_sessions import http_session

TIMEOUT_S = (5, 60)
PROMPT_A = "Question: A baker makes 24 loaves a day and sells them in bags of 3. How many bags does she fill?\nAnswer:"
PROMPT_B = "The weather in Fairford today is"
GREEDY = {"temperature": 0, "max_new_tokens": 12}
RID_HEX = re.compile(r"[0-9a-f]{32}")



@pytest.fixture(scope="module")
def http():
    with http_session() as session:
        yield session


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    with launch_reference_server("fix", tmp_path_factory.mktemp("refserver-surface"), ready_timeout_s=60) as server:
        yield server.base_url


@pytest.fixture(scope="module")
def stepped(tmp_path_factory):
    """A server whose engine is a child process (step clock), with a 3 s health-check timeout."""
    previous = os.environ.get("SGLANG_HEALTH_CHECK_TIMEOUT")
    os.environ["SGLANG_HEALTH_CHECK_TIMEOUT"] = "3"
    try:
        with launch_reference_server("fix", tmp_path_factory.mktemp("refserver-stepped"), extra_args=["--step-time-ms", "5"],
                                     ready_timeout_s=60) as server:
            yield server
    finally:
        if previous is None:
            os.environ.pop("SGLANG_HEALTH_CHECK_TIMEOUT", None)
        else:
            os.environ["SGLANG_HEALTH_CHECK_TIMEOUT"] = previous


def generate(http: requests.Session, url: str, body: dict) -> requests.Response:
    return http.post(f"{url}/generate", json=body, timeout=TIMEOUT_S)


def sse_events(response: requests.Response) -> list:
    events: list = []
    for line in response.iter_lines():
        if line.startswith(b"data: "):
            payload = line[len(b"data: "):]
            events.append("[DONE]" if payload == b"[DONE]" else json.loads(payload))
    return events


# --------------------------------------------------------------------------- /health
def test_health_answers_after_a_generation_with_an_empty_body(http, url):
    """/health submits a one-token generation and looks for its answer once a second, so the
    fastest 200 takes about 1 s; the body is empty (srt/entrypoints/http_server.py:721-783)."""
    for path in ("/health", "/health_generate"):
        started = time.monotonic()
        response = http.get(f"{url}{path}", timeout=TIMEOUT_S)
        elapsed = time.monotonic() - started
        assert response.status_code == 200 and response.content == b""
        assert elapsed >= 0.9, f"{path} answered in {elapsed:.2f} s: it cannot have waited for a generation"


def _engine_children(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(child) for child in children]


def test_health_fails_when_the_generation_gets_no_answer(http, stepped):
    """No answer within SGLANG_HEALTH_CHECK_TIMEOUT: 503 with an empty body, and the server is
    marked UnHealthy, so /ready says 503 too, until a later /health succeeds (http_server.py:
    785-799, 715-718; tokenizer_manager is_ready needs ServerStatus.Up)."""
    url = stepped.base_url
    children = _engine_children(stepped.pid)
    assert children, "the stepped server should run its engine in a child process"
    for child in children:
        os.kill(child, signal.SIGSTOP)
    try:
        response = http.get(f"{url}/health", timeout=TIMEOUT_S)
        assert response.status_code == 503 and response.content == b""
        assert http.get(f"{url}/ready", timeout=TIMEOUT_S).status_code == 503
    finally:
        for child in children:
            os.kill(child, signal.SIGCONT)
    assert http.get(f"{url}/health", timeout=TIMEOUT_S).status_code == 200
    assert http.get(f"{url}/ready", timeout=TIMEOUT_S).status_code == 200


def test_health_without_generation_is_a_plain_200(tmp_path, monkeypatch):
    """SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=false: /health answers 200 at once, while
    /health_generate still generates (srt/entrypoints/http_server.py:745-749; environ.py:344)."""
    monkeypatch.setenv("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION", "false")
    with launch_reference_server("fix", tmp_path, ready_timeout_s=60) as server, http_session() as http:
        started = time.monotonic()
        assert http.get(f"{server.base_url}/health", timeout=TIMEOUT_S).status_code == 200
        assert time.monotonic() - started < 0.9
        started = time.monotonic()
        assert http.get(f"{server.base_url}/health_generate", timeout=TIMEOUT_S).status_code == 200
        assert time.monotonic() - started >= 0.9


REQUEST_COUNTERS = ("sglang:num_requests_total", "sglang:prompt_tokens_total", "sglang:generation_tokens_total")


def request_counters(http: requests.Session, url: str) -> dict[str, float]:
    values = parse_prometheus(http.get(f"{url}/metrics", timeout=TIMEOUT_S).text)
    return {name: values[name] for name in REQUEST_COUNTERS}


def test_health_checks_and_log_metrics_false_are_in_no_request_counter(http, url):
    """The health check's generation is sent with log_metrics=False (srt/entrypoints/http_server.py:757-761), and
    the tokenizer manager collects a request's metrics only when log_metrics is true (srt/managers/
    tokenizer_manager.py:2788), so /health polls, like a /generate that sends log_metrics false, leave SGLang's
    request counters (num_requests, prompt and generation tokens: metrics_collector.py:2109-2136) alone."""
    before = request_counters(http, url)
    for path in ("/health", "/health_generate"):
        assert http.get(f"{url}{path}", timeout=TIMEOUT_S).status_code == 200
    unlogged = generate(http, url, {"text": PROMPT_B, "sampling_params": GREEDY, "log_metrics": False})
    assert unlogged.status_code == 200 and unlogged.json()["meta_info"]["completion_tokens"] >= 1
    assert request_counters(http, url) == before
    logged = generate(http, url, {"text": PROMPT_B, "sampling_params": GREEDY}).json()["meta_info"]
    after = request_counters(http, url)
    assert after["sglang:num_requests_total"] == before["sglang:num_requests_total"] + 1
    assert after["sglang:prompt_tokens_total"] == before["sglang:prompt_tokens_total"] + logged["prompt_tokens"]
    assert after["sglang:generation_tokens_total"] == before["sglang:generation_tokens_total"] + logged["completion_tokens"]


# --------------------------------------------------------------------------- n > 1
def test_parallel_sampling_on_a_batch_answers_prompt_major_under_fresh_rids(http, url):
    """n > 1 on a batch of B prompts gives B*n results, prompt-major (all samples of prompt 0,
    then prompt 1), every sample under a freshly generated rid even when `rid` was given
    (srt/managers/tokenizer_manager.py:2164-2185, io_struct.py:382-388)."""
    singles = [generate(http, url, {"text": p, "sampling_params": GREEDY}).json() for p in (PROMPT_A, PROMPT_B)]
    response = generate(http, url, {"text": [PROMPT_A, PROMPT_B], "rid": "mine", "sampling_params": {**GREEDY, "n": 2}})
    assert response.status_code == 200, response.text
    results = response.json()
    assert isinstance(results, list) and len(results) == 4
    for position, result in enumerate(results):
        expected = singles[position // 2]
        assert result["output_ids"] == expected["output_ids"] and result["text"] == expected["text"], position
    rids = [result["meta_info"]["id"] for result in results]
    assert len(set(rids)) == 4 and all(RID_HEX.fullmatch(rid) for rid in rids), rids


def test_parallel_sampling_streams_an_index_per_flattened_result(http, url):
    """A streamed n > 1 batch carries `index`, the position in the flattened prompt-major list
    (tokenizer_manager.py:2211-2226); each index ends with its own finish."""
    whole = generate(http, url, {"text": [PROMPT_A, PROMPT_B], "sampling_params": {**GREEDY, "n": 2}}).json()
    body = {"text": [PROMPT_A, PROMPT_B], "sampling_params": {**GREEDY, "n": 2}, "stream": True}
    with http.post(f"{url}/generate", json=body, stream=True, timeout=TIMEOUT_S) as response:
        events = sse_events(response)
    assert events[-1] == "[DONE]"
    last: dict[int, dict] = {}
    for chunk in events[:-1]:
        last[chunk["index"]] = chunk
    assert sorted(last) == [0, 1, 2, 3]
    for index, chunk in last.items():
        assert chunk["meta_info"]["finish_reason"] is not None
        assert chunk["output_ids"] == whole[index]["output_ids"]


def test_list_logprob_options_cannot_be_combined_with_n(http, url):
    """A per-item list of a logprob option with n > 1 is a ValueError (io_struct.py:781-790)."""
    response = generate(http, url, {"text": PROMPT_A, "sampling_params": {**GREEDY, "n": 2}, "return_logprob": [True]})
    assert response.status_code == 400
    assert response.json() == {"error": {"message": "Cannot use list return_logprob with parallel_sample_num > 1"}}


# --------------------------------------------------------------------------- sampling keys
ADMITTED = {
    "nulls": {"temperature": None, "top_p": None, "top_k": None, "min_p": None, "min_new_tokens": None, "n": 1,
              "ignore_eos": None, "skip_special_tokens": None, "no_stop_trim": None, "stop": None, "stop_token_ids": None,
              "frequency_penalty": None, "presence_penalty": None, "repetition_penalty": None, "sampling_seed": None,
              "spaces_between_special_tokens": None, "stream_interval": None, "logit_bias": None, "json_schema": None},
    "custom-params-string": {"custom_params": "not a map"},
    "custom-params-list": {"custom_params": [1, "two"]},
    "beam-width-one": {"beam_width": 1},
    "beam-width-null": {"beam_width": None},
    "watermark-null": {"watermark": None},
    "watermark-disabled": {"watermark": {"enabled": False}},
    "n-zero": {"n": 0},
}


@pytest.mark.parametrize("case", ADMITTED)
def test_sampling_params_sglang_admits_are_served(http, url, case):
    """Every key of the contract takes null as its default (api/v1/api_types.py:1259-1321,
    decode_SamplingParams) and SamplingParams.__post_init__ maps None to defaults
    (srt/sampling/sampling_params.py:207-250); custom_params passes any value through
    (api_types.py:1311-1312; verify reads it only when it is a dict, sampling_params.py:67-68);
    beam_width 1 is not a beam request (io_struct.py:515-529); watermark enabled=false is
    accepted without --enable-watermark (watermarking/core.py:221-231); n = 0 never fans out
    (io_struct.py:550) and SamplingParams.verify has no rule on n."""
    params = {"max_new_tokens": 6, **ADMITTED[case]}
    response = generate(http, url, {"text": PROMPT_A, "sampling_params": params})
    assert response.status_code == 200, response.text
    assert isinstance(response.json(), dict) and response.json()["meta_info"]["completion_tokens"] >= 1


REFUSED = {
    # A contract violation: 400 with a plain-string error.
    "watermark-unknown-key": ({"watermark": {"colour": "red"}}, 400, lambda body: isinstance(body["error"], str) and "colour" in body["error"]),
    "choice-not-strings": ({"choice": [1]}, 400, lambda body: isinstance(body["error"], str)),
    # A ValueError after normalisation: 400 {"error": {"message": ...}}.
    "beam-width-zero": ({"beam_width": 0}, 400, lambda body: body == {"error": {"message": "beam_width must be at least 1, got 0."}}),
    "watermark-enabled": ({"watermark": {"enabled": True}}, 400,
                          lambda body: body == {"error": {"message": "request watermarking requires the server to enable --enable-watermark"}}),
    "watermark-empty": ({"watermark": {}}, 400, lambda body: body == {"error": {"message": "request watermark must set enabled or key"}}),
    "watermark-window": ({"watermark": {"enabled": False, "context_window": 0}}, 400,
                         lambda body: body == {"error": {"message": "watermark context_window must be a positive integer"}}),
}


@pytest.mark.parametrize("case", REFUSED)
def test_sampling_params_sglang_refuses_are_refused_its_way(http, url, case):
    """Refusals in SGLang's shapes: the contract gate (api/v1/api_types.py:1315-1318, answered at
    srt/entrypoints/http_server.py:937-939), SamplingParams.verify (sampling_params.py:253-254),
    and the watermark rules (watermarking/core.py:163-241, tokenizer_manager.py:213-225)."""
    params, status, check = REFUSED[case]
    response = generate(http, url, {"text": PROMPT_A, "sampling_params": {"max_new_tokens": 4, **params}})
    assert response.status_code == status, response.text
    assert check(response.json()), response.text


@pytest.mark.parametrize("params", [{"choice": ["yes", "no"]}, {"choice": None}, {"n": None}], ids=["choice", "choice-null", "n-null"])
def test_keys_the_contract_admits_but_sglang_code_fails_on_are_a_500(http, url, params):
    """`choice` is a contract key (api_types.py:1256, 1317-1318) but not a SamplingParams field,
    so SamplingParams(**kwargs) raises TypeError (tokenizer_manager.py:1565); `"n": null` makes
    `None > 1` raise TypeError (io_struct.py:538, 550). No handler maps TypeError, so FastAPI
    answers 500 "Internal Server Error" (http_server.py:578, 635 handle only HTTPException and
    RequestValidationError)."""
    response = generate(http, url, {"text": PROMPT_A, "sampling_params": {"max_new_tokens": 4, **params}})
    assert response.status_code == 500 and response.text == "Internal Server Error"


# --------------------------------------------------------------------------- aborted items
BEAM_REFUSAL = "Beam search is not supported with speculative decoding."


def test_a_batch_with_an_item_aborted_with_a_status_fails_whole(http, url):
    """The scheduler aborts a beam request on a speculative server with status 400
    (srt/beam_search/coordinator.py:125-126, scheduler.py:3040-3046). A non-stream answer with
    such an abort raises ValueError (tokenizer_manager.py:1914-1918); a batch gathers its
    results, so the one raise fails the whole request (tokenizer_manager.py:2192-2205): 400
    {"error": {"message": ...}} (http_server.py:989-991, 2246-2250), alone or in a batch."""
    single = generate(http, url, {"text": PROMPT_A, "sampling_params": {**GREEDY, "beam_width": 2}})
    assert single.status_code == 400 and single.json() == {"error": {"message": BEAM_REFUSAL}}
    batch = generate(http, url, {"text": [PROMPT_A, PROMPT_B], "sampling_params": [GREEDY, {**GREEDY, "beam_width": 2}]})
    assert batch.status_code == 400 and batch.json() == {"error": {"message": BEAM_REFUSAL}}


def test_a_streamed_abort_with_a_status_is_a_chunk(http, url):
    """Streamed, the same abort is a normal chunk whose finish_reason is the abort, then [DONE]
    (tokenizer_manager.py:1920-1922 returns it; http_server.py:951-957 writes it)."""
    body = {"text": PROMPT_A, "sampling_params": {**GREEDY, "beam_width": 2}, "stream": True}
    with http.post(f"{url}/generate", json=body, stream=True, timeout=TIMEOUT_S) as response:
        assert response.status_code == 200
        events = sse_events(response)
    assert events[-1] == "[DONE]" and len(events) == 2
    reason = events[0]["meta_info"]["finish_reason"]
    assert reason == {"type": "abort", "message": BEAM_REFUSAL, "status_code": 400, "err_type": None}


def test_an_abort_without_a_status_is_returned_not_raised(http, stepped):
    """/abort_request aborts with FINISH_ABORT() and no status (scheduler.py:5811-5812); such an
    answer is returned normally, 200 with the abort finish (tokenizer_manager.py:1900-1906)."""
    url = stepped.base_url
    answer: dict = {}

    def long_request() -> None:
        with http_session() as session:
            body = {"text": PROMPT_A, "sampling_params": {"max_new_tokens": 2000, "ignore_eos": True, "temperature": 0}}
            answer["response"] = session.post(f"{url}/generate", json=body, timeout=TIMEOUT_S)

    worker = threading.Thread(target=long_request)
    worker.start()
    time.sleep(1.0)
    assert http.post(f"{url}/abort_request", json={"abort_all": True}, timeout=TIMEOUT_S).status_code == 200
    worker.join(timeout=60)
    response = answer["response"]
    assert response.status_code == 200, response.text
    reason = response.json()["meta_info"]["finish_reason"]
    assert reason["type"] == "abort" and reason["status_code"] is None


# --------------------------------------------------------------------------- /v1/completions stream
def test_completions_stream_carries_token_ids_and_logprobs_per_chunk(http, url):
    """With `return_token_ids` each chunk's choice carries the new output ids (`token_ids`) and its
    first chunk the `prompt_token_ids`; with `logprobs` each chunk carries the logprobs of its new
    positions, null when it has none (srt/entrypoints/openai/serving_completions.py:291-347,
    374-386). Chunks serialize `usage: null` (protocol.py:568-582, model_dump_json)."""
    body = {"prompt": PROMPT_A, "max_tokens": 24, "temperature": 0, "logprobs": 0, "return_token_ids": True}
    whole = http.post(f"{url}/v1/completions", json=body, timeout=TIMEOUT_S).json()
    choice = whole["choices"][0]
    assert choice["logprobs"]["top_logprobs"] == []  # no top logprobs asked: meta_info has none
    assert len(choice["logprobs"]["token_logprobs"]) == len(choice["token_ids"]) and choice["prompt_token_ids"]
    with http.post(f"{url}/v1/completions", json={**body, "stream": True}, stream=True, timeout=TIMEOUT_S) as response:
        events = sse_events(response)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    ids, logprobs = [], []
    for position, chunk in enumerate(chunks):
        assert "usage" in chunk and chunk["usage"] is None
        (streamed,) = chunk["choices"]
        assert isinstance(streamed["token_ids"], list)
        assert ("prompt_token_ids" in streamed) == (position == 0)
        if streamed["token_ids"]:
            assert len(streamed["logprobs"]["token_logprobs"]) == len(streamed["token_ids"]) == len(streamed["logprobs"]["tokens"])
            logprobs += streamed["logprobs"]["token_logprobs"]
        else:
            assert streamed["logprobs"] is None
        ids += streamed["token_ids"]
    assert chunks[0]["choices"][0]["prompt_token_ids"] == choice["prompt_token_ids"]
    assert ids == choice["token_ids"]
    assert logprobs == choice["logprobs"]["token_logprobs"]


def test_completions_stream_interleaves_choices_each_under_its_rid(http, url):
    """With n > 1 the stream is the native batch stream re-shaped: every chunk has one choice,
    its `index` the flattened position and its `id` that request's rid
    (serving_completions.py:258-259, 386-391)."""
    body = {"prompt": PROMPT_A, "max_tokens": 16, "temperature": 0, "n": 2, "return_token_ids": True, "stream": True}
    with http.post(f"{url}/v1/completions", json=body, stream=True, timeout=TIMEOUT_S) as response:
        chunks = sse_events(response)[:-1]
    ids_by_index: dict[int, set[str]] = {}
    for chunk in chunks:
        (streamed,) = chunk["choices"]
        ids_by_index.setdefault(streamed["index"], set()).add(chunk["id"])
    assert sorted(ids_by_index) == [0, 1]
    assert all(len(ids) == 1 for ids in ids_by_index.values())
    assert ids_by_index[0] != ids_by_index[1]


def test_top_level_watermark_is_read_as_the_sampling_one(http, url):
    """GenerateReqInput's own `watermark` is copied into the sampling params, and naming it in
    both places is a ValueError (srt/managers/tokenizer_manager.py:1553-1559); it is not
    contract-checked, so an unknown field is normalize_watermark_request's ValueError
    (srt/sampling/watermarking/core.py:173-175)."""
    ok = generate(http, url, {"text": PROMPT_A, "watermark": {"enabled": False}, "sampling_params": {"max_new_tokens": 4}})
    assert ok.status_code == 200, ok.text
    both = generate(http, url, {"text": PROMPT_A, "watermark": {"enabled": False},
                                "sampling_params": {"max_new_tokens": 4, "watermark": {"enabled": False}}})
    assert both.status_code == 400
    assert both.json() == {"error": {"message": "watermark must be provided either at the request top level or inside sampling_params, not both"}}
    unknown = generate(http, url, {"text": PROMPT_A, "watermark": {"colour": "red"}, "sampling_params": {"max_new_tokens": 4}})
    assert unknown.status_code == 400 and unknown.json() == {"error": {"message": "watermark contains unknown fields"}}


def test_an_abort_with_another_status_is_that_status_in_the_openai_error_shape():
    """A non-400 abort status is raised as HTTPException(status, message) (tokenizer_manager.py:
    1919-1921), answered by the handler at http_server.py:578-630 as ErrorResponse
    (openai/protocol.py:106-111) with that status; a status-less abort is not an error."""
    from specsuite.refserver.server import abort_error_response

    def result(reason: dict) -> dict:
        return {"text": "", "output_ids": [], "meta_info": {"finish_reason": reason}}

    ok = result({"type": "length", "length": 3})
    timeout = result({"type": "abort", "message": "SLA exceeded", "status_code": 503, "err_type": None})
    response = abort_error_response([ok, timeout])
    assert response is not None and response.status == 503
    assert json.loads(response.body) == {"object": "error", "message": "SLA exceeded", "type": "503", "param": None, "code": 503}
    assert abort_error_response([ok, result({"type": "abort", "message": "Aborted", "status_code": None, "err_type": None})]) is None


class _InstantEngine:
    """An engine that answers a request inside `submit`, before the handler that submitted it runs again."""

    config = SimpleNamespace(speculative=False, num_steps=0, num_draft_tokens=0)

    def submit(self, request) -> None:
        request.notify()

    def abort(self, request) -> None:
        pass


def test_health_counts_an_answer_that_arrives_before_the_handler_resumes(monkeypatch):
    """SGLang takes the check's start time before its request runs (http_server.py:775-778), so an engine that
    answers at once makes a healthy server; a start taken after the submit would wait for a later answer."""
    from specsuite.refserver.server import STATE_KEY, ServerState, health

    monkeypatch.setenv("SGLANG_HEALTH_CHECK_TIMEOUT", "3")
    model = SimpleNamespace(vocab_size=16, context_length=64, stop_str_max_len=lambda stops: 0)
    state = ServerState(model=model, engine=_InstantEngine(), server_args={"random_seed": 0}, launch_command="",
                        api_key=None, enable_metrics=False, ready=True)
    request = SimpleNamespace(app={STATE_KEY: state}, path="/health")
    response = asyncio.run(health(request))
    assert response.status == 200 and not state.unhealthy
