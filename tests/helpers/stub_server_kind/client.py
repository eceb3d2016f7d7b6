"""Stubby's client: the protocol over Stubby's routes. `GET /stubby/identity` names the engine and the model;
`POST /stubby/generate` takes a native /generate body and answers in the native vocabulary (an object, or a list
for a batch), so the typed calls build the body with the protocol's helpers and read the answer as SGLang's.
Its tokenizer is one id per character (`ord`), done here: Stubby serves no tokenizer routes."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from specsuite.errors import SpecsuiteError
from specsuite.server.generation import Generation, generations_from_sglang
from specsuite.server.protocol import Answer, GenerationRequest, NativeCallsThroughPayloads, NativeGenerationRequest, RawAnswer, native_payload
from specsuite.server.transport import HttpServerClient

ENGINE = "stubby"
IDENTITY_PATH = "/stubby/identity"
GENERATE_PATH = "/stubby/generate"


class StubbyClient(NativeCallsThroughPayloads, HttpServerClient):
    """One Stubby server; its native call goes through `generate` (`NativeCallsThroughPayloads`)."""

    # -- the raw-answer hook a checking client overrides ----------------------------------------

    def generate(self, payload: dict[str, Any]) -> Any:
        """POST /stubby/generate: the native answer as Stubby sent it."""
        return self._http.json_or_raise("POST", GENERATE_PATH, self._http.request("POST", GENERATE_PATH, json_body=payload))

    # -- typed generation (the protocol) --------------------------------------------------------

    def send_request(self, request: GenerationRequest) -> RawAnswer:
        payload = native_payload(request)
        return RawAnswer(payload, self.generate(payload))

    def parse_answer(self, request: GenerationRequest, sent: RawAnswer) -> Answer:
        return Answer(generations_from_sglang(sent.wire, sent.raw), sent.wire, sent.raw)

    def generate_request(self, request: GenerationRequest) -> Answer:
        return self.parse_answer(request, self.send_request(request))

    def generate_requests(self, requests: Sequence[GenerationRequest]) -> list[Answer]:
        return [self.generate_request(request) for request in requests]

    def stream_request(self, request: GenerationRequest) -> Iterator[Generation]:
        """Stubby does not stream: the whole answer is the one event."""
        return iter(self.generate_request(request).generations[-1:])

    def stream_native(self, request: NativeGenerationRequest) -> Iterator[dict[str, Any]]:
        """One chunk per result, with the batch `index` a native stream carries."""
        reply = self.generate_native(request)
        if not request.batch:
            return iter(reply.results)
        return iter([{**answer, "index": index} for index, answer in enumerate(reply.results)])

    # -- server facts and tokenizer ---------------------------------------------------------------

    def model_info(self) -> dict[str, Any]:
        identity = self._http.json_or_raise("GET", IDENTITY_PATH, self._http.request("GET", IDENTITY_PATH))
        if not isinstance(identity, dict) or identity.get("engine") != ENGINE:
            raise SpecsuiteError(f"{self.base_url} does not look like a Stubby server: {IDENTITY_PATH} names no engine")
        return {"model_path": identity.get("model_path")}

    def check_connection(self) -> dict[str, Any]:
        return self.model_info()

    def server_info(self) -> dict[str, Any]:
        return {"server_kind": ENGINE}

    def flush_cache(self) -> bool:
        return False  # no such route: the kind says so (flushes_cache False)

    def health(self) -> bool:
        return self._probe(IDENTITY_PATH)

    def ready(self) -> bool:
        return self.health()

    def tokenize(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return [ord(char) for char in text]

    def detokenize(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return "".join(map(chr, ids))

    def detokenize_each(self, ids: list[int], skip_special_tokens: bool = False) -> list[str]:
        return [chr(token) for token in ids]
