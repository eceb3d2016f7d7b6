"""Reference-server hardening: hypothesis fuzzes the request schema of
/generate (and, more lightly, the OpenAI and tokenizer routes) against one launched server; 256
concurrent streams all finish; clients that disconnect mid-stream are aborted and leave nothing running;
a three-second run of tools/calibration/soak.py loses no record.

The oracle: every answer is 200 or 400 (the refserver documents no other status for these routes),
a 400 carries one of SGLang's error shapes, a 200 stream ends with `data: [DONE]`, nothing takes
longer than `REQUEST_TIMEOUT_S`, and the process is alive and healthy at the end.

Budgets stay small on purpose: `max_new_tokens` (or `max_tokens`) is drawn from -5..4 or from values
the server must reject, never null or 5..4095, which would legally generate up to the context length
and make 1,000 examples take an hour. `n` stays below 4 for the same reason (see
`test_huge_n_is_bounded`). `SPECSUITE_FUZZ_EXAMPLES` sets the /generate example count (default 1000;
the other routes get a fifteenth of it, at least 50); hypothesis runs derandomized, so a failure
reproduces.

What the fuzz has found in the server (HTTP 500s on detokenize and token prompts, broken streams on odd
`stream_options`, an unbounded `n`) stays as regression tests (`FIXED_FINDINGS`, `test_huge_n_is_bounded`),
and the strategies do not step around it.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import Counter
from typing import Any

import aiohttp
import orjson
import pytest
import requests
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from specsuite.server.counters import parse_prometheus
from specsuite.server.launcher import launch_reference_server
from specsuite.server.transport import error_message_of

GENERATE_EXAMPLES = int(os.environ.get("SPECSUITE_FUZZ_EXAMPLES", "1000"))
OTHER_ROUTE_EXAMPLES = max(GENERATE_EXAMPLES // 15, 50)
REQUEST_TIMEOUT_S = 30.0
ALLOWED_STATUSES = {200, 400}
FUZZ_SETTINGS = dict(deadline=None, derandomize=True, database=None, print_blob=True,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
CONTEXT_LENGTH = 4096  # the reference model's max_position_embeddings
CONCURRENT_STREAMS = 256
STREAM_TOKENS = 6
DISCONNECTING_CLIENTS = 32


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with launch_reference_server("fix", tmp_path_factory.mktemp("refserver-fuzz"), ready_timeout_s=120) as running:
        yield running


@pytest.fixture(scope="module")
def http():
    with requests.Session() as session:
        session.trust_env = False
        yield session


# --------------------------------------------------------------------------- strategies
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12))
WILD = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                    max_leaves=6)
NOT_INT = WILD.filter(lambda v: not isinstance(v, int) or isinstance(v, bool))
NUMBERS = st.one_of(st.integers(min_value=-(2**65), max_value=2**65), st.floats(allow_nan=False, allow_infinity=False, width=64))
# Rejected budgets, and 0..4: never null or 5..4095, which would legally generate up to the context length.
BUDGET = st.one_of(st.integers(min_value=-5, max_value=4), st.sampled_from([4097, 10**6, 2**63 - 1, 2**63, -(2**63)]), NOT_INT.filter(lambda v: v is not None))
SMALL_COUNT = st.one_of(st.integers(min_value=-2, max_value=3), NOT_INT.filter(lambda v: v is not None))
IDS = st.lists(st.integers(min_value=-5, max_value=8200), max_size=16)
STRINGS = st.one_of(st.text(max_size=16), st.lists(st.text(max_size=8), max_size=4))

VALID_SAMPLING_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "min_new_tokens": st.integers(min_value=0, max_value=4),
    "temperature": st.one_of(st.just(0), st.floats(min_value=0, max_value=3)),
    "top_p": st.floats(min_value=1e-9, max_value=1),
    "top_k": st.one_of(st.just(-1), st.integers(min_value=1, max_value=100)),
    "min_p": st.floats(min_value=0, max_value=1),
    "n": st.integers(min_value=1, max_value=3),
    "stop": STRINGS,
    "stop_token_ids": st.lists(st.integers(min_value=0, max_value=8127), max_size=4),
    "ignore_eos": st.booleans(),
    "skip_special_tokens": st.booleans(),
    "spaces_between_special_tokens": st.booleans(),
    "no_stop_trim": st.booleans(),
    "stream_interval": st.integers(min_value=1, max_value=4),
    "sampling_seed": st.integers(min_value=-(2**63), max_value=2**63 - 1),
}
OTHER_SAMPLING_KEYS = ("frequency_penalty", "presence_penalty", "repetition_penalty", "stop_regex", "logit_bias", "json_schema", "regex",
                       "ebnf", "structural_tag", "custom_params", "unknown_key")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def cheap_budget(value: Any) -> bool:
    """False for token budgets the server must honour at length: null (up to the context) and 5..4095."""
    return value is not None and not (_is_int(value) and 5 <= value < CONTEXT_LENGTH)


def cheap_n(value: Any) -> bool:
    """False for n of 4 and more: legal, but it multiplies the work (and from about 10**5 on it is finding 5)."""
    return not (_is_int(value) and value >= 4)


VALID_SAMPLING = st.fixed_dictionaries({"max_new_tokens": st.integers(min_value=0, max_value=4)}, optional=VALID_SAMPLING_VALUES)
# One field of an otherwise valid object replaced by something odd: reaches each check on its own.
MUTANT_SAMPLING = st.builds(lambda valid, key, value: {**valid, key: value}, VALID_SAMPLING,
                            st.sampled_from(["max_new_tokens", *VALID_SAMPLING_VALUES, *OTHER_SAMPLING_KEYS]), st.one_of(NUMBERS, WILD)
                            ).filter(lambda params: cheap_budget(params["max_new_tokens"]) and cheap_n(params.get("n")))
MUTANT_SAMPLING = st.one_of(MUTANT_SAMPLING, st.builds(lambda valid, budget: {**valid, "max_new_tokens": budget}, VALID_SAMPLING, BUDGET))
# Falsy values mean "defaults" (128 tokens): covered by explicit examples, not drawn each time.
SAMPLING_FIELD = st.one_of(VALID_SAMPLING, MUTANT_SAMPLING, st.lists(st.one_of(VALID_SAMPLING, MUTANT_SAMPLING), min_size=1, max_size=3),
                           WILD.filter(bool))

VALID_PROMPT = st.one_of(st.fixed_dictionaries({"text": st.text(min_size=1, max_size=40)}),
                         st.fixed_dictionaries({"text": st.lists(st.text(min_size=1, max_size=20), min_size=1, max_size=3)}),
                         st.fixed_dictionaries({"input_ids": st.lists(st.integers(0, 8127), min_size=1, max_size=16)}),
                         st.fixed_dictionaries({"input_ids": st.lists(st.lists(st.integers(0, 8127), min_size=1, max_size=8), min_size=1, max_size=3)}))
ODD_PROMPT = st.fixed_dictionaries({}, optional={"text": st.one_of(STRINGS, WILD), "input_ids": st.one_of(IDS, st.lists(IDS, max_size=3), WILD)})
VALID_OPTIONS = {
    "stream": st.booleans(),
    "return_logprob": st.booleans(),
    "logprob_start_len": st.integers(-1, 3),
    "top_logprobs_num": st.integers(0, 5),
    "return_text_in_logprobs": st.booleans(),
    "rid": st.text(alphabet="abcdef0123456789", min_size=1, max_size=8),
}
ODD_OPTIONS = {
    "stream": WILD,
    "return_logprob": st.one_of(st.lists(st.booleans(), max_size=3), WILD),
    "logprob_start_len": st.one_of(st.integers(-3, 10**6), st.lists(st.integers(-3, 5), max_size=3), WILD),
    "top_logprobs_num": st.one_of(st.integers(-3, 10**9), WILD),
    "return_text_in_logprobs": WILD,
    "rid": st.one_of(st.lists(st.text(max_size=4), max_size=3), WILD),
    "unknown_top_level": WILD,
}
GENERATE_BODY = st.builds(
    lambda prompt, params, options, odd: {**prompt, "sampling_params": params, **options, **odd},
    st.one_of(VALID_PROMPT, VALID_PROMPT, VALID_PROMPT, ODD_PROMPT),
    SAMPLING_FIELD,
    st.fixed_dictionaries({}, optional=VALID_OPTIONS),
    st.one_of(st.just({}), st.just({}), st.fixed_dictionaries({}, optional=ODD_OPTIONS)),
)


def with_one_odd_field(valid: st.SearchStrategy[dict[str, Any]], keys: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    """A valid body with one field (possibly a new one) replaced by an odd value."""
    return st.builds(lambda body, key, value: {**body, key: value}, valid, st.sampled_from([*keys, "unknown_key"]), st.one_of(NUMBERS, WILD))


def affordable_body(body: dict[str, Any]) -> bool:
    """Cheap to serve."""
    budget = body.get("max_completion_tokens", body.get("max_tokens"))
    return cheap_budget(budget) and cheap_n(body.get("n"))


PROMPTS = st.one_of(st.text(min_size=1, max_size=30), st.lists(st.text(min_size=1, max_size=10), min_size=1, max_size=3),
                    st.lists(st.integers(0, 8127), min_size=1, max_size=12),
                    st.lists(st.lists(st.integers(0, 8127), min_size=1, max_size=6), min_size=1, max_size=2))
OPENAI_OPTIONS = {"temperature": st.floats(min_value=0, max_value=2), "top_p": st.floats(min_value=1e-9, max_value=1), "n": st.integers(1, 3),
                  "stop": STRINGS, "stream": st.booleans(), "stream_options": st.fixed_dictionaries({"include_usage": st.booleans()}),
                  "seed": st.integers(min_value=0, max_value=2**63 - 1), "model": st.text(max_size=8)}
VALID_COMPLETION = st.fixed_dictionaries({"prompt": PROMPTS, "max_tokens": st.integers(1, 4)},
                                         optional={**OPENAI_OPTIONS, "logprobs": st.integers(0, 3), "return_token_ids": st.booleans()})
COMPLETION_BODY = st.one_of(VALID_COMPLETION, with_one_odd_field(VALID_COMPLETION, ["prompt", "max_tokens", *OPENAI_OPTIONS, "logprobs",
                                                                                   "return_token_ids"])).filter(affordable_body)
MESSAGE = st.fixed_dictionaries({"role": st.sampled_from(["user", "system", "assistant"]),
                                 "content": st.one_of(st.text(max_size=30),
                                                      st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=10)}),
                                                               max_size=2))})
ODD_MESSAGE = st.one_of(st.fixed_dictionaries({"role": WILD, "content": WILD}), WILD)
VALID_CHAT = st.fixed_dictionaries({"messages": st.lists(MESSAGE, min_size=1, max_size=3), "max_tokens": st.integers(0, 4)},
                                   optional={**OPENAI_OPTIONS, "logprobs": st.booleans(), "top_logprobs": st.integers(0, 3)})
CHAT_BODY = st.one_of(VALID_CHAT, with_one_odd_field(VALID_CHAT, ["messages", "max_tokens", "max_completion_tokens", *OPENAI_OPTIONS, "logprobs",
                                                                  "top_logprobs"]),
                      st.builds(lambda body, odd: {**body, "messages": [*body["messages"], odd]}, VALID_CHAT, ODD_MESSAGE)).filter(affordable_body)
TOKENIZER_BODY = st.one_of(st.fixed_dictionaries({"prompt": st.one_of(st.text(max_size=30), STRINGS, WILD)}),
                           st.fixed_dictionaries({"tokens": st.one_of(IDS, st.lists(IDS, max_size=3), WILD)}, optional={"skip_special_tokens": WILD}),
                           WILD)


# --------------------------------------------------------------------------- the oracle
def post(http: requests.Session, url: str, body: Any, statuses: Counter) -> None:
    """Send one fuzzed body and check the answer against the oracle (module docstring)."""
    data = json.dumps(body).encode()  # json, not orjson: integers beyond 64 bits must go out too
    started = time.monotonic()
    response = http.post(url, data=data, headers={"Content-Type": "application/json"}, timeout=(5, REQUEST_TIMEOUT_S))
    raw = response.content
    assert time.monotonic() - started < REQUEST_TIMEOUT_S
    statuses[response.status_code] += 1
    assert response.status_code in ALLOWED_STATUSES, f"HTTP {response.status_code} for {data[:400]!r}: {raw[:300]!r}"
    if response.status_code == 400:
        assert error_message_of(orjson.loads(raw)) is not None, f"400 without an error shape: {raw[:300]!r}"
    elif response.headers.get("Content-Type", "").startswith("text/event-stream"):
        events = [line for line in raw.split(b"\n") if line.startswith(b"data: ")]
        assert events and events[-1] == b"data: [DONE]", f"stream without [DONE] for {data[:400]!r}: {raw[-300:]!r}"
        for event in events[:-1]:
            orjson.loads(event[len(b"data: "):])
    else:
        assert isinstance(orjson.loads(raw), (dict, list))


def assert_healthy(server, http: requests.Session) -> None:
    assert server.running, "the reference server process died"
    assert http.get(f"{server.base_url}/health", timeout=(5, 30)).status_code == 200


def test_generate_schema_fuzz(server, http):
    statuses: Counter = Counter()

    @settings(max_examples=GENERATE_EXAMPLES, **FUZZ_SETTINGS)
    @given(GENERATE_BODY)
    @example({"text": "hi", "sampling_params": {}})  # defaults: 128 tokens
    @example({"text": "hi", "sampling_params": None})
    @example({"text": "hi", "sampling_params": [], "stream": True})
    @example({"input_ids": [[]], "sampling_params": {"max_new_tokens": 1}})
    @example({"text": [], "sampling_params": {"max_new_tokens": 1}})
    def check(body: dict[str, Any]) -> None:
        post(http, f"{server.base_url}/generate", body, statuses)

    check()
    assert sum(statuses.values()) >= GENERATE_EXAMPLES
    assert statuses[200] >= GENERATE_EXAMPLES // 10, f"the fuzz rarely got past validation: {dict(statuses)}"
    assert_healthy(server, http)


def test_raw_bodies_fuzz(server, http):
    """Bytes that are not JSON, or JSON that is not an object, on every JSON route."""
    statuses: Counter = Counter()
    routes = ("/generate", "/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize", "/abort_request")

    @settings(max_examples=OTHER_ROUTE_EXAMPLES, **FUZZ_SETTINGS)
    @given(st.sampled_from(routes), st.one_of(st.binary(max_size=64), WILD.map(lambda value: json.dumps(value).encode())))
    def check(route: str, data: bytes) -> None:
        response = http.post(f"{server.base_url}{route}", data=data, headers={"Content-Type": "application/json"}, timeout=(5, REQUEST_TIMEOUT_S))
        statuses[response.status_code] += 1
        assert response.status_code in ALLOWED_STATUSES, f"HTTP {response.status_code} on {route} for {data!r}: {response.content[:300]!r}"

    check()
    assert_healthy(server, http)


@pytest.mark.parametrize(("route", "bodies"), [("/v1/completions", COMPLETION_BODY), ("/v1/chat/completions", CHAT_BODY),
                                                ("/tokenize", TOKENIZER_BODY), ("/detokenize", TOKENIZER_BODY)])
def test_other_routes_fuzz(server, http, route, bodies):
    statuses: Counter = Counter()

    @settings(max_examples=OTHER_ROUTE_EXAMPLES, **FUZZ_SETTINGS)
    @given(bodies)
    def check(body: Any) -> None:
        post(http, f"{server.base_url}{route}", body, statuses)

    check()
    assert_healthy(server, http)


FIXED_FINDINGS = [  # (route, body): found by this fuzz, fixed in the server; each must stay a 400 or a complete stream
    ("/detokenize", {"tokens": [], "skip_special_tokens": None}),  # 1: HTTP 500, the flag reaches tokenizer.decode unchecked
    ("/detokenize", {"tokens": [[None]]}),  # 2: HTTP 500, inner lists are not checked for ints
    ("/v1/completions", {"prompt": [1, "a"], "max_tokens": 1}),  # 3: HTTP 500, token prompts are not checked for ints
    ("/v1/completions", {"prompt": [[1, "x"]], "max_tokens": 1}),  # 3
    ("/v1/completions", {"prompt": "hi", "max_tokens": 1, "stream": True, "stream_options": [1]}),  # 4: the stream breaks off
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "stream": True, "stream_options": "x"}),  # 4
]


@pytest.mark.parametrize(("route", "body"), FIXED_FINDINGS, ids=[f"finding{n}" for n in (1, 2, 3, 3, 4, 4)])
def test_fixed_findings_stay_fixed(server, http, route, body):
    post(http, f"{server.base_url}{route}", body, Counter())


def test_huge_n_is_bounded(server, http):
    """n multiplies the work; a huge n must be refused or capped, not queued for minutes."""
    started = time.monotonic()
    response = http.post(f"{server.base_url}/generate", json={"text": "hi", "sampling_params": {"n": 10**6, "max_new_tokens": 0}},
                         timeout=(5, REQUEST_TIMEOUT_S))
    assert response.status_code == 400 and time.monotonic() - started < 5
    assert_healthy(server, http)


# --------------------------------------------------------------------------- load and disconnects
def counters(http: requests.Session, server) -> dict[str, float]:
    return parse_prometheus(http.get(f"{server.base_url}/metrics", timeout=(5, 30)).text)


async def _stream_all(url: str, count: int) -> list[tuple[int, bytes]]:
    body = {"text": "Once upon a time", "stream": True, "sampling_params": {"max_new_tokens": STREAM_TOKENS, "temperature": 0.8, "ignore_eos": True}}
    connector = aiohttp.TCPConnector(limit=count)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as session:
        async def one(index: int) -> tuple[int, bytes]:
            async with session.post(f"{url}/generate", json={**body, "rid": f"load-{index}"}) as response:
                return response.status, await response.read()

        return await asyncio.gather(*(one(i) for i in range(count)))


def test_256_concurrent_streams_all_finish(server, http):
    before = counters(http, server)
    started = time.monotonic()
    results = asyncio.run(_stream_all(server.base_url, CONCURRENT_STREAMS))
    assert time.monotonic() - started < 90
    assert [status for status, _ in results] == [200] * CONCURRENT_STREAMS
    assert all(raw.rstrip().endswith(b"data: [DONE]") for _, raw in results)
    after = counters(http, server)
    assert after["sglang:num_requests_total"] - before["sglang:num_requests_total"] == CONCURRENT_STREAMS
    assert after["sglang:generation_tokens_total"] - before["sglang:generation_tokens_total"] == STREAM_TOKENS * CONCURRENT_STREAMS
    assert_healthy(server, http)


async def _disconnect_mid_stream(url: str, count: int) -> int:
    """Open `count` long streams, read one chunk of each, then drop the connections. Returns chunks read."""
    body = {"text": "Once upon a time", "stream": True, "sampling_params": {"max_new_tokens": 2000, "ignore_eos": True}}
    read = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=count, force_close=True),
                                     timeout=aiohttp.ClientTimeout(total=60)) as session:
        responses = await asyncio.gather(*(session.post(f"{url}/generate", json=body) for _ in range(count)))
        for response in responses:
            first = await response.content.readline()
            read += first.startswith(b"data: ")
            response.close()  # drops the connection with the stream unfinished
    return read


@pytest.fixture(scope="module")
def paced_server(tmp_path_factory):
    """A reference server whose decode steps take at least 5 ms: a 2000-token stream then lasts 10 s or more, so
    every stream is still running when its client drops it, however slowly a loaded machine runs the client."""
    with launch_reference_server("fix", tmp_path_factory.mktemp("refserver-paced"), ["--step-time-ms", "5"], ready_timeout_s=120) as running:
        yield running


def test_clients_disconnecting_mid_stream_are_aborted(paced_server, http):
    server = paced_server
    before = counters(http, server)
    assert asyncio.run(_disconnect_mid_stream(server.base_url, DISCONNECTING_CLIENTS)) == DISCONNECTING_CLIENTS

    def settled() -> dict[str, float]:
        """The counters once every dropped request has ended. A request is counted when it ends, and the engine
        ends the dropped ones one after another: a loaded machine can show none running while some are still
        uncounted, so "nothing running" alone does not mean settled."""
        deadline = time.monotonic() + 20
        while True:
            now = counters(http, server)
            ended = now["sglang:num_requests_total"] - before["sglang:num_requests_total"]
            idle = now["sglang:num_running_reqs"] == 0 and now["sglang:num_queue_reqs"] == 0
            if idle and ended >= DISCONNECTING_CLIENTS or time.monotonic() > deadline:
                return now
            time.sleep(0.1)

    after = settled()
    assert after["sglang:num_running_reqs"] == 0 and after["sglang:num_queue_reqs"] == 0, after
    assert after["sglang:num_requests_total"] - before["sglang:num_requests_total"] == DISCONNECTING_CLIENTS, after
    aborted = after["sglang:num_aborted_requests_total"] - before["sglang:num_aborted_requests_total"]
    assert aborted == DISCONNECTING_CLIENTS, f"{aborted} of {DISCONNECTING_CLIENTS} dropped streams were aborted"
    # Aborted streams stopped early: far fewer tokens than 2000 each were generated.
    generated = after["sglang:generation_tokens_total"] - before["sglang:generation_tokens_total"]
    assert generated < DISCONNECTING_CLIENTS * 2000 / 4
    assert_healthy(server, http)


def test_short_soak_loses_nothing(server, tmp_path):
    """tools/calibration/soak.py in miniature: requests sent, records on disk and the server's counters agree."""
    from tools.calibration.soak import parse_args, run_soak

    args = parse_args(["--duration", "3", "--concurrency", "32", "--max-new-tokens", "4"])
    summary = asyncio.run(run_soak(server.base_url, tmp_path, args))
    assert summary["requests_sent"] > 32 and summary["checks"] == dict.fromkeys(summary["checks"], True), summary
