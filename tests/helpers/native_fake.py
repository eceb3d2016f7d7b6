"""Stand-in servers that answer SGLang's native /generate in Python get the protocol's typed calls.

A fake defines `generate(payload) -> answer` (the native JSON it would send back); mixing in
`NativeFake` gives it `generate_request`, so workloads that speak `specsuite.server.protocol` can drive it.
Answers are parsed as `SGLangClient` parses them, minus its fault checks (fakes leave out fields
a real server always sends, such as `finish_reason`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from specsuite.server.generation import Generation, generations_from_sglang, prompt_hash
from specsuite.server.protocol import Answer, GenerationRequest, native_payload


class NativeFake:
    def generate(self, payload: dict[str, Any]) -> Any:  # pragma: no cover - every fake overrides it
        raise NotImplementedError

    def generate_request(self, request: GenerationRequest) -> Answer:
        payload = native_payload(request)
        raw = self.generate(payload)
        return Answer(generations_from_sglang(payload, raw), payload, raw)


def typed_generate(native: Callable[[dict[str, Any]], Any]) -> Callable[[GenerationRequest], Generation]:
    """`run_gsm8k`'s `generate(request) -> Generation` from a fake that answers native payloads.
    Lenient like the fakes (no ids, no counts are fine); a body without a string `text` is the
    malformed answer a real client would refuse, raised here as ValueError."""

    def generate(request: GenerationRequest) -> Generation:
        payload = native_payload(request)
        answer = native(payload)
        if not isinstance(answer, dict) or not isinstance(answer.get("text"), str):
            raise ValueError("response is not a /generate object with a string 'text'")
        meta = answer.get("meta_info") or {}
        return Generation(prompt=request.prompt, prompt_ids=None, prompt_hash=prompt_hash(request.prompt, None),
                          params=request.sampling.params(), output_ids=answer.get("output_ids"), text=answer["text"],
                          finish_reason=meta.get("finish_reason"), completion_tokens=meta.get("completion_tokens"), meta_info=meta)

    return generate
