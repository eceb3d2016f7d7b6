"""The server-kind registry: one `ServerKind` entry per server the harness speaks, and the lookups generic code uses.

A kind's own folder (specsuite/server/kinds/sglang/, vllm/) builds its entry (`kind.py`), which the package registers
(`specsuite.server.kinds.BUILTIN_KINDS`): its client, the
probe detection asks, its launcher, the client that runs its integrity rules, the serving-bench formats it offers
(`BenchBackend`), its Prometheus counters, and flags named after what the server does. Generic code looks an entry
up (`get`, `kind_of_client`, `bench_backend`, `kind_of_backend`) or iterates them (`detect`, `all_counters`) and
asks it; it never names a kind.

Detection (`--server-kind auto`) asks each kind's probe in registration order; the first that recognises the
server wins. A server none recognises gets the first kind registered (SGLang), whose client then says in one line
what is wrong. A probe refused for want of a key is that one-line auth error, not "unknown server".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import requests

from specsuite.errors import SpecsuiteError
from specsuite.server.protocol import GenerationRequest, ServerClient
from specsuite.server.transport import HttpTransport

AUTO = "auto"  # --server-kind's default: ask the server
PROBE_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class AcceptCounters:
    """Two Prometheus counters whose increase over a run gives the server-wide accept length, 1 + accepted / drafts."""

    drafts: str
    accepted: str

    def accept_length(self, before: Mapping[str, float] | None, after: Mapping[str, float] | None) -> float | None:
        """The accept length between two parsed scrapes; None without both, or without a draft in between."""
        if not before or not after or self.drafts not in after:
            return None
        drafts = after[self.drafts] - before.get(self.drafts, 0.0)
        accepted = after.get(self.accepted, 0.0) - before.get(self.accepted, 0.0)
        return 1.0 + accepted / drafts if drafts > 0 else None


@dataclass(frozen=True)
class BenchBackend:
    """One wire format of the serving benchmark, under its bench_serving --backend name.

    `body(request, model, sent, extra)` builds the request body (specsuite/server/bench/formats.py) and
    `read_chunk(state, chunk, stamp)` reads one streamed chunk into the request's measurements
    (`ChunkReading`, specsuite/server/bench/streams.py; a kind's own format's reader is in its folder, `bench_stream.py`).
    """

    name: str
    path: str
    body: Callable[[GenerationRequest, str, Mapping[str, Any], Mapping[str, Any]], dict[str, Any]]
    read_chunk: Callable[[Any, dict[str, Any], float], None]
    sends_sampling_flags: bool  # temperature always, top_p below 1, whatever --oai-sampling says
    sends_model: bool  # the body names the served model: without --model the bench asks /v1/models
    cumulative_text: bool  # every chunk carries the whole text so far
    splits_chunk_gaps: bool = False  # with a server accept length, a chunk's gap is split over its retokenized text
    needs_text_prompts: bool = False  # token-id prompts cannot be sent


@dataclass(frozen=True)
class ServerKind:
    """Everything generic code may ask about one server kind. The flags say what the server does, each where the
    harness acts on it; the kind's module cites the server's source for each."""

    name: str  # --server-kind's value, results' `server_kind`
    display_name: str  # in messages
    client_class: type[Any]  # built with (base_url, api_key=..., admin_api_key=...)
    probe: Callable[[HttpTransport], bool]  # detection: does the server answer this kind's signature
    signature: str  # what the probe looks for, for the line that says no kind matched
    checking_client: type[Any]  # the integrity suites' client: (inner client, recorder: a ViolationSink, context)
    integrity_rules: ModuleType  # the rules that checking client runs
    bench_backends: tuple[BenchBackend, ...]  # the first is the bench's default on this kind
    counters: tuple[str, ...] = ()  # the Prometheus counters a correctness run records as deltas
    bench_accept_counters: AcceptCounters | None = None  # set: the bench's accept length is a /metrics delta
    launcher: Callable[..., list[str]] | None = None  # the command line that serves this kind here
    serves_server_info: bool = False  # GET /server_info: the bench reads the context limit and accept length there
    serves_model_info: bool = False  # GET /model_info names the tokenizer; else the bench takes /v1/models' root
    flushes_cache: bool = False  # POST /flush_cache resets the accept-length counters
    scores_token_ids_logprob: bool = False  # logprobs of chosen ids at every position (token_ids_logprob)
    answers_over_completions: bool = False  # the suites' native payloads go over /v1/completions and its own rules
    seeds_each_request: bool = False  # a seeded request gets its own generator: seeds always honoured (not batch invariance)
    sees_stop_strings_anywhere: bool = False  # a stop string is found however many ids spelled it
    earliest_stop_string_wins: bool = False  # the stop string completing earliest in the text wins, not the listed first
    ignore_eos_keeps_stop_token_ids: bool = False  # stop_token_ids still stop a request with ignore_eos
    auto_dtype_downcasts_float32: bool = False  # dtype auto serves a float32 model in a 16-bit type it picks
    # The sampling fields (SGLang's names) the server fills from the model's generation_config.json when a request
    # leaves them out: a test's request sends every one (specsuite.server.sampling_pins.pinned).
    model_sampling_defaults: tuple[str, ...] = ()
    batch_invariance: Callable[[Mapping[str, Any]], bool | None] | None = None  # from server_info(): promised, not, unknown

    @property
    def default_bench_backend(self) -> str:
        return self.bench_backends[0].name

    @property
    def integrity_rules_path(self) -> str:
        """The rules module's file, relative to the repository root."""
        return self.integrity_rules.__name__.replace(".", "/") + ".py"

    def client(self, base_url: str, api_key: str | None = None, admin_api_key: str | None = None, timeout_s: float = 120.0) -> ServerClient:
        return self.client_class(base_url, api_key=api_key, admin_api_key=admin_api_key, timeout_s=timeout_s)


_KINDS: dict[str, ServerKind] = {}


def register(kind: ServerKind) -> ServerKind:
    """Add a kind (after those registered before it: detection asks it later); its names must be new."""
    if kind.name == AUTO or kind.name in _KINDS:
        raise SpecsuiteError(f"server kind {kind.name!r} is taken")
    if not kind.bench_backends:
        raise SpecsuiteError(f"server kind {kind.name!r} offers no bench backend")
    taken = set(bench_backend_names()) & {backend.name for backend in kind.bench_backends}
    if taken:
        raise SpecsuiteError(f"server kind {kind.name!r}: bench backend {', '.join(sorted(taken))} is taken")
    _KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Remove a registered kind (a test's own kind, when the test ends)."""
    del _KINDS[name]


def all_kinds() -> tuple[ServerKind, ...]:
    """Every kind, in registration (and detection) order."""
    return tuple(_KINDS.values())


def names() -> tuple[str, ...]:
    return tuple(_KINDS)


def choices() -> tuple[str, ...]:
    """--server-kind's choices: auto, then every kind."""
    return (AUTO, *names())


def get(name: str) -> ServerKind:
    if name not in _KINDS:
        raise SpecsuiteError(f"unknown server kind {name!r}: choose one of {', '.join(choices())}")
    return _KINDS[name]


def fallback() -> ServerKind:
    """The kind a server no probe recognises is taken for: the first registered."""
    return next(iter(_KINDS.values()))


def named_or_fallback(name: str | None) -> ServerKind:
    """The kind called `name`, or the fallback when there is no such kind (a record without `server_kind`)."""
    return _KINDS.get(name or "", fallback())


def get_json(http: HttpTransport, path: str) -> Any:
    """A probe's GET: the JSON answer, or None when the route is missing or not JSON. A refused key raises its one-line
    auth error (the key is missing or wrong: say so, not "unknown server")."""
    response = http.request("GET", path)
    with response:
        auth = http.auth_error(response)
        if auth is not None:
            raise auth
        if response.status_code != 200:
            return None
        try:
            return response.json()
        except requests.exceptions.JSONDecodeError:
            return None


def detect(base_url: str, api_key: str | None = None) -> ServerKind:
    """The first kind whose probe recognises the server, else the fallback."""
    http = HttpTransport(base_url, api_key, timeout_s=PROBE_TIMEOUT_S)
    try:
        return next((kind for kind in all_kinds() if kind.probe(http)), fallback())
    finally:
        http.close()


def make_client(name: str, base_url: str, api_key: str | None = None, admin_api_key: str | None = None,
                timeout_s: float = 120.0) -> ServerClient:
    """The client for a server kind (`auto` probes the server first); `timeout_s`: how long it waits for one answer."""
    kind = detect(base_url, api_key) if name == AUTO else get(name)
    return kind.client(base_url, api_key=api_key, admin_api_key=admin_api_key, timeout_s=timeout_s)


def kind_of_client(client: Any) -> ServerKind:
    """The kind whose client this is (a checking client wraps one: its `inner`); the fallback for any other object.
    Of several matches, the most derived client class wins."""
    inner = getattr(client, "inner", client)
    matching = [kind for kind in all_kinds() if isinstance(inner, kind.client_class)]
    return max(matching, key=lambda kind: len(kind.client_class.__mro__)) if matching else fallback()


def bench_backends() -> tuple[BenchBackend, ...]:
    """Every kind's bench formats, kind by kind."""
    return tuple(backend for kind in all_kinds() for backend in kind.bench_backends)


def bench_backend_names() -> tuple[str, ...]:
    return tuple(backend.name for backend in bench_backends())


def kind_of_backend(name: str) -> ServerKind:
    """The kind that offers the bench backend `name` (an unknown name is refused in one line)."""
    for kind in all_kinds():
        if any(backend.name == name for backend in kind.bench_backends):
            return kind
    raise SpecsuiteError(f"unknown backend {name!r}: choose one of {', '.join(bench_backend_names())}")


def bench_backend(name: str) -> BenchBackend:
    """The bench format called `name` (an unknown name is refused in one line)."""
    return next(backend for backend in kind_of_backend(name).bench_backends if backend.name == name)


def all_counters() -> tuple[str, ...]:
    """Every kind's Prometheus counters, kind by kind."""
    return tuple(counter for kind in all_kinds() for counter in kind.counters)
