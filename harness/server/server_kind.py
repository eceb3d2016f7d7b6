"""Which server is under test, SGLang or vLLM, and the client that speaks to it.

Detection (`--server-kind auto`, the default) asks the server itself:

* SGLang answers `GET /model_info` (or the older `/get_model_info`) with a `model_path`;
* vLLM has neither, answers `GET /version` with `{"version": ...}` and lists its model in
  `GET /v1/models` with `owned_by: "vllm"` (vllm/entrypoints/openai/models/serving.py builds the
  card; docs/vllm_api_facts.md).

Anything without vLLM's signature is treated as SGLang, the first server kind, so a server that is
neither gets the SGLang client's one-line diagnosis ("does not look like an SGLang server: ...").
A probe refused for want of a key is that one-line auth error. `--server-kind sglang|vllm` skips
the probe (a proxy that hides one of the routes, say).
"""

from __future__ import annotations

from typing import Any

import requests

from harness.errors import SpecsuiteError
from harness.server.sglang_client import SGLangClient
from harness.server.transport import HttpTransport
from harness.server.vllm_client import VLLMClient

SGLANG, VLLM, AUTO = "sglang", "vllm", "auto"
SERVER_KINDS = (AUTO, SGLANG, VLLM)
PROBE_TIMEOUT_S = 30.0


def _json_or_none(http: HttpTransport, path: str) -> Any:
    response = http.request("GET", path)
    with response:
        auth = http.auth_error(response)
        if auth is not None:
            raise auth  # the key is missing or wrong: say so, not "unknown server"
        if response.status_code != 200:
            return None
        try:
            return response.json()
        except requests.exceptions.JSONDecodeError:
            return None


def detect_server_kind(base_url: str, api_key: str | None = None) -> str:
    """`vllm` when the server shows vLLM's signature, else `sglang`."""
    http = HttpTransport(base_url, api_key, timeout_s=PROBE_TIMEOUT_S)
    try:
        for path in ("/model_info", "/get_model_info"):
            info = _json_or_none(http, path)
            if isinstance(info, dict) and info.get("model_path"):
                return SGLANG
        version = _json_or_none(http, "/version")
        models = _json_or_none(http, "/v1/models") if isinstance(version, dict) and version.get("version") else None
    finally:
        http.close()
    cards = models.get("data") if isinstance(models, dict) else None
    owners = {card.get("owned_by") for card in cards or [] if isinstance(card, dict)}
    return VLLM if VLLM in owners else SGLANG


def make_client(kind: str, base_url: str, api_key: str | None = None, admin_api_key: str | None = None) -> SGLangClient | VLLMClient:
    """The client for a server kind (`auto` probes the server first)."""
    if kind == AUTO:
        kind = detect_server_kind(base_url, api_key)
    if kind == VLLM:
        return VLLMClient(base_url, api_key=api_key, admin_api_key=admin_api_key)
    if kind == SGLANG:
        return SGLangClient(base_url, api_key=api_key, admin_api_key=admin_api_key)
    raise SpecsuiteError(f"unknown server kind {kind!r}: choose one of {', '.join(SERVER_KINDS)}")


def kind_of(client: Any) -> str:
    """The kind of a client (a checking client wraps one: its `inner`)."""
    inner = getattr(client, "inner", client)
    return VLLM if isinstance(inner, VLLMClient) else SGLANG
