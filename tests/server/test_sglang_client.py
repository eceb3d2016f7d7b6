"""Tests for specsuite.server.kinds.sglang.client against small HTTP servers started here (stdlib, one thread each).

Every failure must surface as a one-line SpecsuiteError, quickly, without the API key in it.
"""

from __future__ import annotations

import hashlib
import json
import socket
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from specsuite.errors import SpecsuiteError
from specsuite.server.generation import Generation, generations_from_sglang
from specsuite.server.identity import ServerIdentity
from specsuite.server.kinds.sglang.client import SGLangClient
from tests.helpers.http_sessions import serve

API_KEY = "sk-planted-9c2e-SECRET"
MODEL_INFO = {"model_path": "/models/tiny", "tokenizer_path": "/models/tiny", "served_model_name": "tiny"}
SERVER_INFO = {
    "model_path": "/models/tiny",
    "api_key": API_KEY,
    "launch_command": f"python -m sglang.launch_server --model-path /models/tiny --api-key {API_KEY}",
    "version": "0.5.23",
    "speculative_algorithm": "EAGLE",
    "speculative_num_steps": 5,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 6,
    "speculative_use_rejection_sampling": True,
    "internal_states": [{"api_key": API_KEY, "avg_spec_accept_length": 3.0}],
}
STALL_S = 3.0


def generate_result(ids: list[int], logprob_ids: list[int] | None = None) -> dict:
    triples = [[-0.5, i, None] for i in (ids if logprob_ids is None else logprob_ids)]
    return {
        "text": "Hi there!",
        "output_ids": ids,
        "meta_info": {
            "id": "abc",
            "finish_reason": {"type": "stop", "matched": ids[-1]},
            "prompt_tokens": 4,
            "completion_tokens": len(ids),
            "output_token_logprobs": triples,
            "spec_verify_ct": 2,
            "spec_accept_length": len(ids) / 2,
        },
    }


class FakeSGLang(BaseHTTPRequestHandler):
    """Enough of SGLang's native API to exercise the client; `api_key` set means auth is on."""

    protocol_version = "HTTP/1.1"
    api_key: str | None = None
    seen_headers: list[dict[str, str]] = []

    def log_message(self, *args: object) -> None:  # keep test output quiet
        pass

    def send_json(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_text(self, status: int, text: str, content_type: str = "text/plain") -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def authorised(self) -> bool:
        self.seen_headers.append(dict(self.headers))
        open_path = self.path.startswith(("/health", "/ready", "/metrics"))
        if self.api_key is None or open_path or self.headers.get("Authorization") == f"Bearer {self.api_key}":
            return True
        self.send_json(401, {"error": "Unauthorized"})
        return False

    def do_GET(self) -> None:
        if not self.authorised():
            return
        routes = {"/model_info": MODEL_INFO, "/server_info": SERVER_INFO}
        if self.path in routes:
            self.send_json(200, routes[self.path])
        elif self.path in ("/health", "/ready"):
            self.send_text(200, "")
        else:
            self.send_json(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if not self.authorised():
            return
        if self.path == "/generate":
            self.generate(body)
        elif self.path == "/tokenize":
            self.send_json(200, {"tokens": [1, len(body["prompt"])], "count": 2, "max_model_len": 4096})
        elif self.path == "/detokenize":
            tokens = body["tokens"]
            if tokens and isinstance(tokens[0], list):
                self.send_json(200, {"text": [f"<{t[0]}>" for t in tokens]})
            else:
                self.send_json(200, {"text": "".join(f"<{t}>" for t in tokens)})
        elif self.path == "/flush_cache":
            self.send_text(200, "Cache flushed.\n")
        else:
            self.send_json(404, {"detail": "Not Found"})

    def generate(self, body: dict) -> None:
        scenario = body.get("text", "")
        if "bogus" in body.get("sampling_params", {}):
            self.send_json(400, {"error": "unknown field `bogus`, expected one of `max_new_tokens`, ..."})
            return
        if not body.get("stream"):
            if isinstance(scenario, list):
                self.send_json(200, [generate_result([10 + i, 2]) for i in range(len(scenario))])
            else:
                self.send_json(200, generate_result([5, 6, 2]))
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.chunk(b'data: {"text": "Hi", "output_ids": [5], "meta_info": {"finish_reason": null}}\n\n')
        if scenario == "error":
            self.chunk(b'data: {"error": {"message": "boom: bad input", "code": 400}}\n\n')
        elif scenario == "garbage":
            self.chunk(b"data: this is not json\n\n")
        elif scenario == "stall":
            time.sleep(STALL_S)
        elif scenario == "broken":
            self.close_connection = True
            return  # no terminating chunk: the connection just ends
        else:
            self.chunk(b"data: " + json.dumps(generate_result([5, 6, 2])).encode() + b"\n\n")
        if scenario not in ("truncate", "stall"):
            self.chunk(b"data: [DONE]\n\n")
        self.chunk(b"")


class WebPage(BaseHTTPRequestHandler):
    """A web server that is not SGLang: HTML 404 for everything."""

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        data = b"<html><body><h1>404 Not Found</h1></body></html>"
        self.send_response(404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class HtmlOk(WebPage):
    """A web server that answers 200 with HTML everywhere."""

    def do_GET(self) -> None:
        data = b"<html>welcome</html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class Silent(WebPage):
    """Accepts the request and never answers in time."""

    def do_GET(self) -> None:
        time.sleep(STALL_S)




@pytest.fixture(scope="module")
def open_server() -> Iterator[str]:
    with serve(FakeSGLang) as url:
        yield url


class KeyedSGLang(FakeSGLang):
    api_key = API_KEY
    seen_headers: list[dict[str, str]] = []


@pytest.fixture(scope="module")
def keyed_server() -> Iterator[str]:
    with serve(KeyedSGLang) as url:
        yield url


def refused_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def one_line_error(call, *fragments: str) -> str:
    """Run `call`, demand a SpecsuiteError that is one line, quick, secret-free and says `fragments`."""
    start = time.monotonic()
    with pytest.raises(SpecsuiteError) as info:
        call()
    elapsed = time.monotonic() - start
    message = str(info.value)
    assert message and "\n" not in message, message
    assert API_KEY not in message
    for fragment in fragments:
        assert fragment in message, message
    assert elapsed < 30
    return message


# -- connection problems ------------------------------------------------------------------


def test_refused_port_message():
    port = refused_port()
    client = SGLangClient(f"http://127.0.0.1:{port}", api_key=API_KEY, connect_timeout_s=2)
    message = one_line_error(client.check_connection)
    assert message == f"cannot connect to http://127.0.0.1:{port}: connection refused — is the server running?"


def test_connect_timeout_is_bounded():
    # A listener whose accept queue is full: Linux drops further SYNs, so connect() hangs.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = [socket.socket() for _ in range(3)]
    try:
        for filler in fillers:
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
        client = SGLangClient(f"http://127.0.0.1:{port}", timeout_s=0.5, connect_timeout_s=0.5)
        start = time.monotonic()
        one_line_error(client.check_connection, f"cannot connect to http://127.0.0.1:{port}: no answer within 0.5 s")
        assert time.monotonic() - start < 5
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


def test_read_timeout_is_bounded():
    with serve(Silent) as url:
        client = SGLangClient(url, timeout_s=0.5, connect_timeout_s=1)
        start = time.monotonic()
        one_line_error(client.check_connection, "timed out", "0.5 s")
        assert time.monotonic() - start < STALL_S


def test_not_sglang_html_404():
    with serve(WebPage) as url:
        one_line_error(SGLangClient(url).check_connection, "does not look like an SGLang server", "404")


def test_not_sglang_html_200():
    with serve(HtmlOk) as url:
        one_line_error(SGLangClient(url).check_connection, "does not look like an SGLang server", "JSON")


def test_bad_url():
    one_line_error(lambda: SGLangClient("localhost:30000"), "http://host:port")


# -- auth ---------------------------------------------------------------------------------


def test_missing_key(keyed_server):
    message = one_line_error(SGLangClient(keyed_server).check_connection)
    assert message.startswith(f"server {keyed_server} requires an API key: set SPECSUITE_API_KEY")


def test_wrong_key(keyed_server):
    client = SGLangClient(keyed_server, api_key="wrong-key-123")
    message = one_line_error(client.check_connection, "API key rejected", "401")
    assert "wrong-key-123" not in message


def test_right_key_is_sent_only_as_bearer(keyed_server):
    KeyedSGLang.seen_headers.clear()
    client = SGLangClient(keyed_server, api_key=API_KEY)
    assert client.check_connection()["model_path"] == "/models/tiny"
    assert client.generate({"text": "hello", "sampling_params": {"max_new_tokens": 3}})["output_ids"] == [5, 6, 2]
    for headers in KeyedSGLang.seen_headers:
        assert headers["Authorization"] == f"Bearer {API_KEY}"
        assert all(API_KEY not in v for k, v in headers.items() if k != "Authorization")


def test_health_and_ready_are_open_even_with_auth(keyed_server):
    client = SGLangClient(keyed_server)
    assert client.health() is True
    assert client.ready() is True


# -- generate -----------------------------------------------------------------------------


def test_generate_non_stream_and_batch(open_server):
    client = SGLangClient(open_server)
    single = client.generate({"text": "hello", "return_logprob": True})
    assert single["output_ids"] == [5, 6, 2]
    batch_payload = {"text": ["a", "b"], "sampling_params": {"temperature": 0.0}, "return_logprob": True}
    batch = client.generate(batch_payload)
    gens = generations_from_sglang(batch_payload, batch)
    assert [g.output_ids for g in gens] == [[10, 2], [11, 2]]
    assert [g.prompt for g in gens] == ["a", "b"]


def test_generate_http_error_carries_server_text(open_server):
    client = SGLangClient(open_server, api_key=API_KEY)
    one_line_error(
        lambda: client.generate({"text": "x", "sampling_params": {"bogus": 1}}), "HTTP 400", "unknown field `bogus`"
    )


def test_generate_rejects_nan_payload(open_server):
    one_line_error(
        lambda: SGLangClient(open_server).generate({"text": "x", "sampling_params": {"temperature": float("nan")}}),
        "not valid JSON",
    )


def test_stream_ok(open_server):
    chunks = list(SGLangClient(open_server).generate_stream({"text": "fine"}))
    assert len(chunks) == 2
    assert chunks[-1]["output_ids"] == [5, 6, 2]


@pytest.mark.parametrize(
    ("scenario", "fragment"),
    [
        ("error", "reported an error: boom: bad input"),
        ("garbage", "non-JSON data line"),
        ("truncate", "ended without data: [DONE]"),
        ("broken", "broke off"),
    ],
)
def test_stream_failures(open_server, scenario, fragment):
    client = SGLangClient(open_server, api_key=API_KEY)
    one_line_error(lambda: list(client.generate_stream({"text": scenario})), fragment)


def test_stream_stall_uses_per_chunk_read_timeout(open_server):
    client = SGLangClient(open_server, timeout_s=0.5)
    stream = client.generate_stream({"text": "stall"})
    start = time.monotonic()
    one_line_error(lambda: list(stream), "stalled", "0.5 s")
    assert time.monotonic() - start < STALL_S


# -- other endpoints ----------------------------------------------------------------------


def test_tokenize_detokenize_flush_metrics(open_server):
    client = SGLangClient(open_server)
    assert client.tokenize("hello") == [1, 5]
    assert client.detokenize([3, 4]) == "<3><4>"
    assert client.detokenize_each([3, 4]) == ["<3>", "<4>"]
    assert client.detokenize_each([]) == []
    assert client.flush_cache() is True
    assert client.metrics_text() is None  # 404: server runs without --enable-metrics


def test_model_info_falls_back_to_deprecated_alias():
    class OldServer(FakeSGLang):
        def do_GET(self) -> None:
            if self.path == "/get_model_info":
                self.send_json(200, MODEL_INFO)
            else:
                self.send_json(404, {"detail": "Not Found"})

    with serve(OldServer) as url:
        assert SGLangClient(url).model_info() == MODEL_INFO


def test_health_false_when_unreachable():
    client = SGLangClient(f"http://127.0.0.1:{refused_port()}", connect_timeout_s=1)
    assert client.health() is False
    assert client.ready() is False


# -- identity from a live (fake) server ----------------------------------------------------


def test_identity_never_holds_the_echoed_key(keyed_server):
    client = SGLangClient(keyed_server, api_key=API_KEY)
    info = client.server_info()
    assert info["api_key"] == API_KEY  # the fake echoes it, as SGLang does
    identity = ServerIdentity.from_server(client.base_url, client.model_info(), info)
    assert API_KEY not in json.dumps(identity.to_dict())
    assert all(API_KEY not in line for line in identity.header_lines())
    assert identity.speculative["speculative_num_draft_tokens"] == 6


# -- Generation records from native results ------------------------------------------------


def test_generation_from_sglang_records_both_token_sources():
    payload = {"text": "hello", "sampling_params": {"temperature": 1.0, "max_new_tokens": 3}}
    result = generate_result([5, 6, 2], logprob_ids=[5, 9, 2, 4])
    [gen] = generations_from_sglang(payload, result)
    assert gen.output_ids == [5, 6, 2]
    assert gen.logprob_ids == [5, 9, 2, 4]
    assert gen.output_logprobs == [-0.5] * 4
    assert gen.token_source_mismatch() == [1, 3]
    assert gen.params == {"temperature": 1.0, "max_new_tokens": 3}
    assert gen.finish_reason == {"type": "stop", "matched": 2}
    assert gen.completion_tokens == 3
    assert "output_token_logprobs" not in gen.meta_info
    assert gen.meta_info["spec_verify_ct"] == 2
    assert gen.prompt_hash == hashlib.sha256(b"hello").hexdigest()[:16]
    assert Generation.from_dict(json.loads(json.dumps(gen.to_dict()))) == gen


def test_generation_without_logprobs_has_no_mismatch():
    result = generate_result([5, 6, 2])
    del result["meta_info"]["output_token_logprobs"]
    [gen] = generations_from_sglang({"input_ids": [1, 2, 3]}, result)
    assert gen.logprob_ids is None and gen.token_source_mismatch() == []
    assert gen.prompt_ids == [1, 2, 3] and gen.prompt is None


def test_generations_n_greater_than_one_are_prompt_major():
    payload = {"input_ids": [[1], [2]], "sampling_params": {"n": 2}}
    results = [generate_result([10 + k, 2]) for k in range(4)]
    gens = generations_from_sglang(payload, results)
    assert [g.prompt_ids for g in gens] == [[1], [1], [2], [2]]
    assert [g.output_ids[0] for g in gens] == [10, 11, 12, 13]


@pytest.mark.parametrize(
    ("payload", "response", "fragment"),
    [
        ({"text": ["a", "b"]}, [generate_result([1, 2])] * 3, "3 results for 2 prompts"),
        ({"sampling_params": {}}, generate_result([1, 2]), "neither text nor input_ids"),
        ({"text": "a"}, {"text": "x", "output_ids": "bad", "meta_info": {}}, "not a list of token ids"),
        ({"text": "a"}, {"text": "x", "output_ids": [1]}, "no meta_info"),
    ],
)
def test_generation_rejects_malformed_results(payload, response, fragment):
    one_line_error(lambda: generations_from_sglang(payload, response), fragment)
