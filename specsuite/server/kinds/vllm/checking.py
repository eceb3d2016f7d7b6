"""vLLM's checking client: a `VLLMClient` whose every raw /v1/completions answer (streamed or not) runs through the
vLLM rules (`specsuite.server.kinds.vllm.integrity_rules`) before it is translated; violations go to the recorder it
was given (`ViolationSink`) and never raise. The kind names it (`ServerKind.checking_client`)."""

from __future__ import annotations

from typing import Any

from specsuite.server.integrity_rules import IntegrityContext, ViolationSink, answered_choice_count, guarded_checks
from specsuite.server.kinds.vllm.client import VLLMClient
from specsuite.server.kinds.vllm.integrity_rules import check_vllm_completion, check_vllm_stream


class CheckingVLLMClient(VLLMClient):
    """A `VLLMClient` that checks what vLLM really sent; like SGLang's checking client, it shares the inner transport."""

    def __init__(self, inner: VLLMClient, recorder: ViolationSink, context: IntegrityContext) -> None:
        self._http = inner._http
        self._model, self._card, self._spec_snapshot = inner._model, inner._card, inner._spec_snapshot
        self.inner = inner
        self.recorder = recorder
        self.context = context

    def answered(self, body: dict[str, Any], result: Any) -> None:
        self.recorder.record(guarded_checks(lambda: check_vllm_completion(body, result, self.context)), answers=answered_choice_count(result))

    def streamed(self, body: dict[str, Any], chunks: list[dict[str, Any]]) -> None:
        self.recorder.record(guarded_checks(lambda: check_vllm_stream(body, chunks, self.context)), answers=1, stream=True)
