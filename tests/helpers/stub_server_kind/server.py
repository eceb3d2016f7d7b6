"""A tiny in-process HTTP server playing Stubby: its identity, its generate route (every prompt answered "ab",
ids [5, 6], claiming `answer_tokens` completion tokens), and for the serving bench /v1/models, a streamed
/v1/completions and /metrics (3 drafts and 4 accepted tokens per bench request so far)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from tests.helpers.http_sessions import serve
from tests.helpers.stub_server_kind.client import ENGINE, GENERATE_PATH, IDENTITY_PATH
from tests.helpers.stub_server_kind.kind import ACCEPTED_COUNTER, DRAFTS_COUNTER, STEPS_COUNTER

TOKENIZER = Path(__file__).resolve().parents[3] / "specsuite" / "fixtures" / "vllm_models" / "target"
MODEL_PATH = "/models/stubby"


def _sse(handler: BaseHTTPRequestHandler, events: list[dict[str, Any]]) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.end_headers()  # HTTP/1.0: the stream ends when the connection closes
    for event in events:
        handler.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
    handler.wfile.write(b"data: [DONE]\n\n")


@contextmanager
def stubby_server(answer_tokens: int = 2) -> Iterator[tuple[str, dict[str, list[Any]]]]:
    """Serve Stubby; yields its URL and what it was sent (`generate`: the generate bodies, `bodies`: the bench's)."""
    seen: dict[str, list[Any]] = {"bodies": [], "generate": []}

    class Handler(BaseHTTPRequestHandler):
        def _json(self, body: object, status: int = 200) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(json.dumps(body).encode())

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path == IDENTITY_PATH:
                self._json({"engine": ENGINE, "model_path": MODEL_PATH})
            elif self.path == "/v1/models":
                self._json({"object": "list", "data": [{"id": "stubby-model", "root": str(TOKENIZER)}]})
            elif self.path == "/metrics":
                requests = len(seen["bodies"])
                self.send_response(200)
                self.end_headers()
                self.wfile.write(f"{DRAFTS_COUNTER} {3 * requests}\n{ACCEPTED_COUNTER} {4 * requests}\n{STEPS_COUNTER} {7 * requests}\n".encode())
            else:
                self._json({"detail": "Not Found"}, 404)

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path == GENERATE_PATH:
                seen["generate"].append(body)
                prompts = body.get("text", body.get("input_ids"))
                batch = isinstance(prompts, list) and bool(prompts) and not isinstance(prompts[0], int)
                answer = {"text": "ab", "output_ids": [5, 6], "meta_info": {"completion_tokens": answer_tokens,
                                                                             "finish_reason": {"type": "length", "length": 2}}}
                self._json([answer] * len(prompts) if batch else answer)
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
