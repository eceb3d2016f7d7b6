"""Synchronous client for SGLang's native HTTP API (/generate, /model_info, /server_info, ...).

Field names and shapes follow SGLang 0.5.23 (`sglang/srt/entrypoints/http_server.py`,
`sglang/srt/managers/tokenizer_manager.py`). The protocol's
typed calls (`generate_request`, `generate_requests`, `stream_request`, and the native
`generate_native` / `stream_native`; `specsuite.server.protocol`)
build the native body (`native_payload`) and parse the answer into `Generation`s; they send through
`generate` / `generate_stream`, which take and return the server's raw JSON and are the raw-answer
hook a checking client overrides (`specsuite.server.kinds.sglang.checking.CheckingClient`).
The real SGLang CPU release speaks this same native API: no other client is needed for it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import requests

from specsuite.errors import SpecsuiteError
from specsuite.server.faults import check_generate_result
from specsuite.server.generation import Generation, generations_from_sglang
from specsuite.server.protocol import (
    Answer,
    GenerationRequest,
    NativeCallsThroughPayloads,
    RawAnswer,
    native_batch_payload,
    native_payload,
)
from specsuite.server.transport import HttpServerClient, int_list, shorten


class SGLangClient(NativeCallsThroughPayloads, HttpServerClient):
    """One SGLang server. Every request carries a (connect, read) timeout; errors are one line. The protocol's native
    calls send their body as it is (`NativeCallsThroughPayloads`, through `generate` / `generate_stream`)."""

    # -- typed generation (the protocol) ------------------------------------------------------

    def send_request(self, request: GenerationRequest) -> RawAnswer:
        """POST /generate for one typed request; the raw answer (a list for n > 1)."""
        payload = native_payload(request)
        return RawAnswer(payload, self.generate(payload))

    def parse_answer(self, request: GenerationRequest, sent: RawAnswer) -> Answer:
        """One Generation per result; an unusable answer is a classified RequestFault."""
        check_generate_result(sent.raw)
        return Answer(generations_from_sglang(sent.wire, sent.raw), sent.wire, sent.raw)

    def generate_request(self, request: GenerationRequest) -> Answer:
        """POST /generate for one typed request; one Generation per result (n > 1 gives n)."""
        return self.parse_answer(request, self.send_request(request))

    def generate_requests(self, requests: Sequence[GenerationRequest]) -> list[Answer]:
        """One batched POST /generate for several requests (one prompt kind, the same logprob
        flags); the answer is split back per request, SGLang's results coming prompt-major."""
        if not requests:
            return []
        payload = native_batch_payload(requests)
        raw = self.generate(payload)
        items = raw if isinstance(raw, list) else [raw]
        check_generate_result(items)
        generations = generations_from_sglang(payload, items)
        per_request = len(generations) // len(requests)
        return [Answer(generations[k * per_request:(k + 1) * per_request], payload, items[k * per_request:(k + 1) * per_request])
                for k in range(len(requests))]

    def stream_request(self, request: GenerationRequest) -> Iterator[Generation]:
        """POST /generate streamed: one Generation per chunk (cumulative unless the server runs
        with --incremental-streaming-output); the request is sent now, the reading is lazy."""
        payload = native_payload(request)
        chunks = self.generate_stream(payload)
        return (generations_from_sglang(payload, chunk)[0] for chunk in chunks)

    # -- generation -------------------------------------------------------------------------

    def generate(self, payload: dict[str, Any]) -> dict[str, Any] | list[dict[str, Any]]:
        """POST /generate without streaming; a batch or n>1 request returns a list."""
        body = {**payload, "stream": False}
        result = self._http.json_or_raise("POST", "/generate", self._http.request("POST", "/generate", json_body=body))
        if not isinstance(result, (dict, list)):
            raise SpecsuiteError(f"POST /generate on {self.base_url} returned {type(result).__name__}, not an object")
        return result

    def generate_stream(self, payload: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """POST /generate with streaming; yields each chunk's JSON until `data: [DONE]`.

        Chunks are cumulative unless the server runs with --incremental-streaming-output. The read
        timeout applies to the wait for each chunk, not to the whole stream.
        """
        body = {**payload, "stream": True}
        response = self._http.request("POST", "/generate", json_body=body, stream=True)
        return self._http.iter_sse("/generate", response)

    # -- server facts -----------------------------------------------------------------------

    def model_info(self) -> dict[str, Any]:
        """GET /model_info, falling back to the deprecated /get_model_info on 404."""
        return self._get_with_alias("/model_info", "/get_model_info")

    def server_info(self) -> dict[str, Any]:
        """GET /server_info, falling back to /get_server_info on 404. Contains the API key in clear:
        never store it raw (build a `ServerIdentity` instead)."""
        return self._get_with_alias("/server_info", "/get_server_info")

    def _get_with_alias(self, path: str, alias: str) -> dict[str, Any]:
        response = self._http.request("GET", path)
        used = path
        if response.status_code == 404:
            response = self._http.request("GET", alias)
            used = alias
            if response.status_code == 404:
                raise SpecsuiteError(
                    f"{self.base_url} does not look like an SGLang server: "
                    f"{path} and {alias} both return 404"
                )
        auth = self._http.auth_error(response)
        if auth is not None:
            raise auth
        if not response.ok:
            raise self._http.status_error("GET", used, response)
        try:
            body = response.json()
        except requests.exceptions.JSONDecodeError:
            body = None
        if not isinstance(body, dict):
            kind = response.headers.get("Content-Type", "unknown content type")
            raise SpecsuiteError(
                f"{self.base_url} does not look like an SGLang server: {used} did not return a JSON object ({kind})"
            )
        return body

    def check_connection(self) -> dict[str, Any]:
        """One probe before a run: returns /model_info, or raises a one-line SpecsuiteError that says
        whether nothing is listening, the server timed out, it is not SGLang, or the key is missing."""
        info = self.model_info()
        if not info.get("model_path"):
            raise SpecsuiteError(
                f"{self.base_url} does not look like an SGLang server: /model_info has no model_path"
            )
        return info

    def health(self) -> bool:
        """GET /health: True on 200. SGLang runs a 1-token generation here, so it takes about 1 s;
        False while starting (503), on any other status, or when the server cannot be reached."""
        return self._probe("/health")

    def ready(self) -> bool:
        """GET /ready: True on 200 (warmup done, not paused). The cheapest readiness probe; False
        on 503, on any other status, or when the server cannot be reached."""
        return self._probe("/ready")


    # -- tokenizer endpoints -----------------------------------------------------------------

    def tokenize(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """POST /tokenize {"prompt": text}; the server's default adds special tokens (e.g. BOS)."""
        body = {"prompt": text, "add_special_tokens": add_special_tokens}
        result = self._http.json_or_raise("POST", "/tokenize", self._http.request("POST", "/tokenize", json_body=body))
        tokens = result.get("tokens") if isinstance(result, dict) else None
        return int_list(tokens, f"/tokenize on {self.base_url} answered tokens that")

    def detokenize(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        """POST /detokenize of one id sequence. The server defaults to skipping specials; we do not,
        so what comes back is the raw decoding. Ids past the tokenizer decode to "" (fast tokenizers)."""
        result = self._detokenize(ids, skip_special_tokens)
        if not isinstance(result, str):
            raise SpecsuiteError(f"/detokenize on {self.base_url} answered {shorten(repr(result), 80)}, not text")
        return result

    def detokenize_each(self, ids: list[int], skip_special_tokens: bool = False) -> list[str]:
        """Decode every id on its own, in one batched /detokenize call (a list of one-id lists)."""
        if not ids:
            return []
        result = self._detokenize([[token] for token in ids], skip_special_tokens)
        if not isinstance(result, list) or len(result) != len(ids) or not all(isinstance(t, str) for t in result):
            raise SpecsuiteError(
                f"/detokenize on {self.base_url} answered {shorten(repr(result), 80)} for {len(ids)} sequences"
            )
        return result

    def _detokenize(self, tokens: list[int] | list[list[int]], skip_special_tokens: bool) -> Any:
        body = {"tokens": tokens, "skip_special_tokens": skip_special_tokens}
        response = self._http.request("POST", "/detokenize", json_body=body)
        result = self._http.json_or_raise("POST", "/detokenize", response)
        if not isinstance(result, dict) or "text" not in result:
            raise SpecsuiteError(f"/detokenize on {self.base_url} answered without a text field")
        return result["text"]

    # -- maintenance ------------------------------------------------------------------------

    def flush_cache(self) -> bool:
        """POST /flush_cache with the admin key (SGLang's ADMIN_OPTIONAL route,
        `srt/entrypoints/http_server.py:1025-1027`): True when flushed; False when the server
        refused with 400 (requests running or waiting, http_server.py:1035-1040). Any other answer,
        a missing or wrong admin key included, is a one-line RequestFault."""
        response = self._http.request("POST", "/flush_cache", admin=True)
        with response:
            if response.ok:
                return True
            if response.status_code == 400:
                return False
            raise self._http.status_error("POST", "/flush_cache", response, admin=True)


