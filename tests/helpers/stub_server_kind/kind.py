"""Stubby's `ServerKind` entry. Its probe asks `GET /stubby/identity`; its serving-bench format is bench_serving's
/v1/completions body under the name "stubby-completions" (always sending the sampling flags); it has no launcher;
its flags differ from SGLang's wherever generic code branches on them."""

from __future__ import annotations

from specsuite.server.bench import formats, streams
from specsuite.server.kinds.registry import AcceptCounters, BenchBackend, ServerKind, get_json
from specsuite.server.transport import HttpTransport
from tests.helpers.stub_server_kind import integrity_rules
from tests.helpers.stub_server_kind.checking import CheckingStubbyClient
from tests.helpers.stub_server_kind.client import ENGINE, IDENTITY_PATH, StubbyClient

STEPS_COUNTER = "stubby:steps_total"
DRAFTS_COUNTER = "stubby:drafts_total"
ACCEPTED_COUNTER = "stubby:accepted_total"


def answers_identity(http: HttpTransport) -> bool:
    """Stubby's signature: /stubby/identity names the engine."""
    identity = get_json(http, IDENTITY_PATH)
    return isinstance(identity, dict) and identity.get("engine") == ENGINE


STUBBY = ServerKind(
    name=ENGINE,
    display_name="Stubby",
    client_class=StubbyClient,
    probe=answers_identity,
    signature=f"Stubby {IDENTITY_PATH}",
    checking_client=CheckingStubbyClient,
    integrity_rules=integrity_rules,
    bench_backends=(BenchBackend("stubby-completions", "/v1/completions", formats.completions_body, streams.read_completions_chunk,
                                 sends_sampling_flags=True, sends_model=True, cumulative_text=False),),
    counters=(STEPS_COUNTER,),
    bench_accept_counters=AcceptCounters(drafts=DRAFTS_COUNTER, accepted=ACCEPTED_COUNTER),
    answers_over_completions=True,
    seeds_each_request=True,
    earliest_stop_string_wins=True,
)
