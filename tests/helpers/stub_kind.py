"""A third server kind, "Stubby", whole in this one module: what a new kind needs, with nothing of the harness edited.

tests/server/test_server_kind_registry.py registers `STUBBY` for one test at a time (`kinds.register`, `kinds.unregister`);
the built-in kinds register themselves on import the same way. Stubby answers `GET /stubby/identity` with
`{"engine": "stubby", "model_path": ...}` (its probe and its client's connection check) and POST /stubby/generate
with a native-shaped answer. Its checking client runs this module's one integrity rule on every answer (the
completion_tokens count matches the output ids), its serving-bench format is bench_serving's /v1/completions body
under the name "stubby-completions" (always sending the sampling flags), and its flags differ from SGLang's wherever
generic code branches on them.
"""

from __future__ import annotations

import sys
from typing import Any

from specsuite.errors import SpecsuiteError
from specsuite.families.bench import streams
from specsuite.families.integrity.recorder import IntegrityRecorder, guarded_checks
from specsuite.families.integrity.sglang_rules import IntegrityContext, Violation
from specsuite.server import bench_formats
from specsuite.server.kinds.registry import AcceptCounters, BenchBackend, ServerKind, get_json
from specsuite.server.transport import HttpServerClient, HttpTransport

ENGINE = "stubby"
IDENTITY_PATH = "/stubby/identity"
GENERATE_PATH = "/stubby/generate"
STEPS_COUNTER = "stubby:steps_total"
DRAFTS_COUNTER = "stubby:drafts_total"
ACCEPTED_COUNTER = "stubby:accepted_total"


def answers_identity(http: HttpTransport) -> bool:
    """Stubby's signature: /stubby/identity names the engine."""
    identity = get_json(http, IDENTITY_PATH)
    return isinstance(identity, dict) and identity.get("engine") == ENGINE


class StubbyClient(HttpServerClient):
    """Stubby's client: its identity route and its generate route."""

    def check_connection(self) -> dict[str, Any]:
        identity = self._http.json_or_raise("GET", IDENTITY_PATH, self._http.request("GET", IDENTITY_PATH))
        if not isinstance(identity, dict) or identity.get("engine") != ENGINE:
            raise SpecsuiteError(f"{self.base_url} does not look like a Stubby server: {IDENTITY_PATH} names no engine")
        return {"model_path": identity.get("model_path")}

    def server_info(self) -> dict[str, Any]:
        return {"server_kind": ENGINE}

    def generate(self, payload: dict[str, Any]) -> dict[str, Any]:
        return self._http.json_or_raise("POST", GENERATE_PATH, self._http.request("POST", GENERATE_PATH, json_body=payload))


def check_answer(answer: dict[str, Any]) -> list[Violation]:
    """Stubby's integrity rule: meta_info.completion_tokens counts the output ids."""
    ids, counted = answer["output_ids"], answer["meta_info"]["completion_tokens"]
    if counted == len(ids):
        return []
    return [Violation("completion_tokens", f"completion_tokens {counted} but {len(ids)} output ids")]


class CheckingStubbyClient(StubbyClient):
    """A `StubbyClient` that runs `check_answer` on every answer and records what breaks; shares the inner transport."""

    def __init__(self, inner: StubbyClient, recorder: IntegrityRecorder, context: IntegrityContext) -> None:
        self._http = inner._http
        self.inner = inner
        self.recorder = recorder
        self.context = context

    def generate(self, payload: dict[str, Any]) -> dict[str, Any]:
        answer = super().generate(payload)
        self.recorder.record(guarded_checks(lambda: check_answer(answer)), answers=1)
        return answer


STUBBY = ServerKind(
    name=ENGINE,
    display_name="Stubby",
    client_class=StubbyClient,
    probe=answers_identity,
    signature=f"Stubby {IDENTITY_PATH}",
    checking_client=CheckingStubbyClient,
    integrity_rules=sys.modules[__name__],  # check_answer, above
    bench_backends=(BenchBackend("stubby-completions", "/v1/completions", bench_formats.completions_body, streams.read_completions_chunk,
                                 sends_sampling_flags=True, sends_model=True, cumulative_text=False),),
    counters=(STEPS_COUNTER,),
    bench_accept_counters=AcceptCounters(drafts=DRAFTS_COUNTER, accepted=ACCEPTED_COUNTER),
    answers_over_completions=True,
    seeds_each_request=True,
    earliest_stop_string_wins=True,
)
