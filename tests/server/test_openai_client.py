"""Tests for specsuite.server.openai_client against a small OpenAI-compatible server started here."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from specsuite.errors import SpecsuiteError
from specsuite.server.openai_client import OpenAICompletionsClient
from tests.helpers.http_sessions import serve

API_KEY = "sk-planted-openai-7d1b"


def choice(index: int, text: str, ids: list[int] | None, finish: str | None) -> dict:
    item = {
        "index": index,
        "text": text,
        "logprobs": {
            "text_offset": [-1] * len(text),
            "token_logprobs": [-0.25] * len(text),
            "tokens": list(text),
            "top_logprobs": [None] * len(text),
        },
        "finish_reason": finish,
        "matched_stop": 2 if finish == "stop" else None,
    }
    if ids is not None:
        item["token_ids"] = ids
    return item


class FakeOpenAI(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    requests_seen: list[dict] = []

    def log_message(self, *args: object) -> None:
        pass

    def send_json(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def event(self, body: object) -> None:
        data = b"data: " + (body if isinstance(body, bytes) else json.dumps(body).encode()) + b"\n\n"
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def authorised(self) -> bool:
        if self.headers.get("Authorization") == f"Bearer {API_KEY}":
            return True
        self.send_json(401, {"error": "Unauthorized"})
        return False

    def do_GET(self) -> None:
        if not self.authorised():
            return
        if self.path == "/v1/models":
            self.send_json(200, {"object": "list", "data": [{"id": "tiny", "object": "model", "max_model_len": 4096}]})
        else:
            self.send_json(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.requests_seen.append(body)
        if not self.authorised():
            return
        if body.get("max_tokens", 16) <= 0:
            self.send_json(400, {"object": "error", "message": "max_tokens must be positive", "code": 400})
            return
        with_ids = body.get("return_token_ids") and body["prompt"] != "no-ids"
        if not body.get("stream"):
            n = body.get("n", 1)
            choices = [choice(i, f"ok{i}!", [7 + i, 8, 2] if with_ids else None, "stop") for i in range(n)]
            usage = {"prompt_tokens": 3, "completion_tokens": 3 * n, "total_tokens": 3 + 3 * n}
            self.send_json(200, {"id": "x", "object": "text_completion", "choices": choices, "usage": usage})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.event({"choices": [choice(0, "He", [5] if with_ids else None, None)]})
        if body["prompt"] == "error":
            self.event({"object": "error", "message": "generation failed mid-way", "type": "InternalServerError"})
        else:
            self.event({"choices": [choice(0, "y!", [6, 2] if with_ids else None, "stop")]})
            self.event({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}})
        self.event(b"[DONE]")
        self.wfile.write(b"0\r\n\r\n")




@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve(FakeOpenAI) as base:
        yield base


@pytest.fixture
def client(url) -> OpenAICompletionsClient:
    return OpenAICompletionsClient(url, api_key=API_KEY, timeout_s=5, connect_timeout_s=2)


def one_line_error(call, *fragments: str) -> str:
    start = time.monotonic()
    with pytest.raises(SpecsuiteError) as info:
        call()
    message = str(info.value)
    assert message and "\n" not in message
    assert API_KEY not in message
    for fragment in fragments:
        assert fragment in message, message
    assert time.monotonic() - start < 30
    return message


def test_models(client):
    assert client.models()[0]["id"] == "tiny"


def test_complete_normalises_with_token_ids(client):
    [gen] = client.complete("Say hi", {"max_tokens": 3, "temperature": 1.0})
    assert gen.output_ids == [7, 8, 2]
    assert gen.text == "ok0!"
    assert gen.output_logprobs == [-0.25] * 4
    assert gen.logprob_ids is None
    assert gen.finish_reason == {"type": "stop", "matched": 2}
    assert gen.completion_tokens == 3
    assert gen.params == {"max_tokens": 3, "temperature": 1.0}
    assert gen.prompt == "Say hi" and gen.prompt_ids is None
    sent = FakeOpenAI.requests_seen[-1]
    assert sent["return_token_ids"] is True and sent["logprobs"] == 0 and sent["stream"] is False
    json.dumps(gen.to_dict())


def test_complete_without_ids_support(client):
    [gen] = client.complete("no-ids", {"max_tokens": 3})
    assert gen.output_ids is None
    assert gen.completion_tokens == 3  # from usage
    assert gen.token_source_mismatch() == []


def test_complete_n_choices_and_token_prompt(client):
    gens = client.complete([1, 2, 3], {"max_tokens": 3, "n": 2})
    assert [g.output_ids for g in gens] == [[7, 8, 2], [8, 8, 2]]
    assert all(g.prompt_ids == [1, 2, 3] and g.prompt is None for g in gens)
    assert gens[0].prompt_hash == gens[1].prompt_hash
    assert gens[1].completion_tokens == 3  # usage is shared, so counts come from the ids


def test_stream_joins_deltas(client):
    [gen] = client.complete_stream("Say hi", {"max_tokens": 3})
    assert gen.text == "Hey!"
    assert gen.output_ids == [5, 6, 2]
    assert gen.output_logprobs == [-0.25] * 4
    assert gen.finish_reason == {"type": "stop", "matched": 2}
    assert gen.completion_tokens == 3
    assert FakeOpenAI.requests_seen[-1]["stream_options"] == {"include_usage": True}


def test_stream_error_chunk(client):
    one_line_error(lambda: client.complete_stream("error", {}), "reported an error: generation failed mid-way")


def test_http_error_text(client):
    one_line_error(lambda: client.complete("x", {"max_tokens": 0}), "HTTP 400", "max_tokens must be positive")


def test_missing_and_wrong_key(url):
    one_line_error(OpenAICompletionsClient(url).models, "requires an API key: set SPECSUITE_API_KEY")
    one_line_error(OpenAICompletionsClient(url, api_key="bad-key-42").models, "API key rejected")


@pytest.mark.parametrize("prompt", ["", [], ["a", "b"], [[1, 2]]])
def test_rejects_batch_or_empty_prompt(client, prompt):
    one_line_error(lambda: client.complete(prompt, {}), "one non-empty string or one list of token ids")


@pytest.mark.parametrize("messages", [[], "hello", [["user", "hi"]]], ids=["empty", "string", "not-objects"])
def test_chat_refuses_malformed_messages_in_one_line_before_any_request(messages):
    client = OpenAICompletionsClient("http://127.0.0.1:9", timeout_s=1, connect_timeout_s=1)
    one_line_error(lambda: client.chat(messages, {}), "chat messages must be a non-empty list of objects")
    one_line_error(lambda: client.chat_stream(messages, {}), "chat messages must be a non-empty list of objects")
