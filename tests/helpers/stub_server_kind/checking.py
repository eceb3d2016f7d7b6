"""Stubby's checking client: runs its rule on every answer and reports to the recorder it was given; shares the
inner client's transport, as the built-in kinds' checking clients do."""

from __future__ import annotations

from typing import Any

from specsuite.server.integrity_rules import IntegrityContext, ViolationSink, guarded_checks
from tests.helpers.stub_server_kind.client import StubbyClient
from tests.helpers.stub_server_kind.integrity_rules import check_answer


class CheckingStubbyClient(StubbyClient):
    def __init__(self, inner: StubbyClient, recorder: ViolationSink, context: IntegrityContext) -> None:
        self._http = inner._http
        self.inner = inner
        self.recorder = recorder
        self.context = context

    def generate(self, payload: dict[str, Any]) -> Any:
        answer = super().generate(payload)
        answers = answer if isinstance(answer, list) else [answer]
        self.recorder.record([v for item in answers for v in guarded_checks(lambda item=item: check_answer(item))], answers=len(answers))
        return answer
