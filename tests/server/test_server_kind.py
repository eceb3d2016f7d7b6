"""Server-kind detection: SGLang by /model_info, vLLM by /version plus a /v1/models card owned by
"vllm" (vllm/entrypoints/openai/models/serving.py: `ModelCard(..., owned_by="vllm")`), anything
else one line. Tiny stdlib HTTP servers answer the routes; no model runs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler

import pytest

from specsuite.errors import SpecsuiteError
from specsuite.server.kinds import detect, kind_of_client, make_client
from specsuite.server.kinds.sglang.client import SGLangClient
from specsuite.server.kinds.vllm.client import VLLMClient
from tests.helpers.http_sessions import serve

VLLM_ROUTES = {"/version": {"version": "0.32.0"},
               "/v1/models": {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "vllm", "root": "/models/m"}]}}
SGLANG_ROUTES = {"/model_info": {"model_path": "/models/m", "tokenizer_path": "/models/m"}}
OTHER_ROUTES = {"/v1/models": {"object": "list", "data": [{"id": "m", "owned_by": "someone"}]}}


@contextmanager
def serving(routes: dict[str, dict]) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            body = routes.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(json.dumps(body or {"detail": "Not Found"}).encode())

        def log_message(self, *args: object) -> None:
            pass

    with serve(Handler) as url:
        yield url


def test_vllm_is_detected_and_gets_the_vllm_client():
    with serving(VLLM_ROUTES) as url:
        assert detect(url).name == "vllm"
        client = make_client("auto", url)
        assert isinstance(client, VLLMClient) and kind_of_client(client).name == "vllm"
        assert client.model_info()["model_path"] == "/models/m"


def test_sglang_is_detected_and_gets_the_sglang_client():
    with serving(SGLANG_ROUTES) as url:
        assert detect(url).name == "sglang"
        client = make_client("auto", url)
        assert isinstance(client, SGLangClient) and kind_of_client(client).name == "sglang"


def test_forced_kind_skips_the_probe_and_unknown_servers_get_the_sglang_diagnosis():
    with serving(OTHER_ROUTES) as url:
        assert isinstance(make_client("vllm", url), VLLMClient)  # no request made
        assert detect(url).name == "sglang"  # no vLLM signature: SGLang's client says what is wrong
        with pytest.raises(SpecsuiteError, match="does not look like an SGLang server") as caught:
            make_client("auto", url).check_connection()
        assert "\n" not in str(caught.value)
    with pytest.raises(SpecsuiteError, match="unknown server kind 'tgi': choose one of auto, sglang, vllm"):
        make_client("tgi", "http://127.0.0.1:1")


def test_a_refused_probe_is_the_auth_error():
    class Refusing(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"error": "Unauthorized"}')

        def log_message(self, *args: object) -> None:
            pass

    with serve(Refusing) as url, pytest.raises(SpecsuiteError, match="SPECSUITE_API_KEY"):
        detect(url)
