"""SGLang's checking client: an `SGLangClient` whose every /generate answer (streamed or not) runs through the SGLang
rules (`specsuite.server.kinds.sglang.integrity_rules`) before it is handed back unchanged; violations go to the
recorder it was given (`ViolationSink`) and never raise. The kind names it (`ServerKind.checking_client`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from specsuite.server.integrity_rules import IntegrityContext, ViolationSink, guarded_checks
from specsuite.server.kinds.sglang.client import SGLangClient
from specsuite.server.kinds.sglang.integrity_rules import check_generate, check_stream
from specsuite.server.native_answers import split_payload


class CheckingClient(SGLangClient):
    """An SGLangClient that checks every /generate answer (streamed or not) and records violations.

    Answers come back exactly as the server sent them; a violation never raises. A stream is
    checked once it has been read to `[DONE]` (a stream abandoned early is not checked).
    """

    def __init__(self, inner: SGLangClient, recorder: ViolationSink, context: IntegrityContext) -> None:
        # No super().__init__: share the inner client's transport (session, auth, timeouts), so
        # closing either closes both and no second connection pool is opened.
        self._http = inner._http
        self.inner = inner
        self.recorder = recorder
        self.context = context

    def generate(self, payload: dict[str, Any]) -> dict[str, Any] | list[dict[str, Any]]:
        response = super().generate(payload)
        self.recorder.record(guarded_checks(lambda: check_generate(payload, response, self.context)), answers=_result_count(payload))
        return response

    def generate_stream(self, payload: dict[str, Any]) -> Iterator[dict[str, Any]]:
        # super().generate_stream sends the request now; only the reading is deferred.
        return self._checked(payload, super().generate_stream(payload))

    def _checked(self, payload: dict[str, Any], chunks: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        seen = []
        for chunk in chunks:
            seen.append(chunk)
            yield chunk
        self.recorder.record(guarded_checks(lambda: check_stream(payload, seen, self.context)), answers=_result_count(payload), stream=True)


def _result_count(payload: dict[str, Any]) -> int:
    try:
        return len(split_payload(payload))
    except (TypeError, AttributeError):
        return 1
