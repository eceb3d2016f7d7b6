"""Which server is under test, SGLang or vLLM, and the client that speaks to it.

Detection (`--server-kind auto`, the default) asks the server itself:

* SGLang answers `GET /model_info` (or the older `/get_model_info`) with a `model_path`;
* vLLM has neither, answers `GET /version` with `{"version": ...}` and lists its model in
  `GET /v1/models` with `owned_by: "vllm"` (vllm/entrypoints/openai/models/serving.py builds the
  card; docs/vllm_api_facts.md).

A server that is neither is one line naming what it answered. `--server-kind sglang|vllm` skips
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
        if response.status_code != 200:
            return None
        try:
            return response.json()
        except requests.exceptions.JSONDecodeError:
            return None


def detect_server_kind(base_url: str, api_key: str | None = None) -> str:
    """`sglang` or `vllm`, from the routes the server answers; one-line error otherwise."""
    http = HttpTransport(base_url, api_key, timeout_s=PROBE_TIMEOUT_S)
    try:
        for path in ("/model_info", "/get_model_info"):
            info = _json_or_none(http, path)
            if isinstance(info, dict) and info.get("model_path"):
                return SGLANG
        version = _json_or_none(http, "/version")
        models = _json_or_none(http, "/v1/models")
    finally:
        http.close()
    cards = models.get("data") if isinstance(models, dict) else None
    owners = {card.get("owned_by") for card in cards or [] if isinstance(card, dict)}
    if isinstance(version, dict) and version.get("version") and VLLM in owners:
        return VLLM
    raise SpecsuiteError(f"{http.display_url} is neither SGLang (no /model_info with a model_path) nor vLLM "
                         f"(/version {'answered' if version else 'missing'}, /v1/models owners {sorted(map(str, owners)) or 'none'}); "
                         "pass --server-kind sglang|vllm to say which")


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
