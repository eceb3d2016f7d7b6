"""The server-client protocol: typed generation requests in, `Generation`s out, one client per server kind.

Workloads describe what they want as a `GenerationRequest` (a prompt as text or ids, a `Sampling`,
the logprob flags) and never build a server's JSON. Each server kind's client translates the request
into its own wire body and its answer straight into `Generation`s:

* `specsuite.server.kinds.sglang.client.SGLangClient`: SGLang's native POST /generate. The real SGLang CPU
  release (the live-SGLang issue) needs nothing beyond it: its recorded answers
  (tests/data/sglang_live/) parse through the same client (tests/server/test_protocol_wire.py shows it);
* `specsuite.server.openai_client.OpenAICompletionsClient`: any OpenAI-shaped POST /v1/completions
  (a `GenerationClient` only: no tokenizer or server facts over that API);
* `specsuite.server.kinds.vllm.client.VLLMClient`: vLLM's /v1/completions with its extras (token ids, logprob
  ids, per-request speculation metrics), answered directly, with no SGLang-shaped intermediate.

The integrity rules check what the server really sent, so every `Answer` carries the raw JSON and
the wire body next to the typed `Generation`s (`Answer.raw`, `Answer.wire`), and every client calls
its raw-answer hook (`SGLangClient.generate`, `answered`/`streamed` on the OpenAI and vLLM clients)
before it parses; the kinds' checking clients (specsuite/server/kinds/<name>/checking.py) and the OpenAI one
(`specsuite.families.integrity.recorder`) override those hooks.

The integrity suite sends every kind the same requests in SGLang's native /generate vocabulary on purpose, so one set
of rules reads every answer: that is the typed native call, `ServerClient.generate_native` /
`stream_native` (a `NativeGenerationRequest` in, a `NativeReply` out), which SGLang serves natively and another
kind through its own adapter (vLLM: specsuite/server/kinds/vllm/native_adapter.py).

`Sampling.params()` names the fields as SGLang's `sampling_params` do (the project's recorded
vocabulary: `Generation.params`, the results, the detectors); the OpenAI and vLLM clients rename them
on the way out (`openai_fields`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from specsuite.errors import SpecsuiteError
from specsuite.server.generation import Generation

# The order the fields go on the wire (the order of the recorded bodies in tests/data/protocol_wire/). SGLang reads
# sampling_params as keyword arguments (SGLang 0.5.23 srt/managers/tokenizer_manager.py:1550-1565,
# `self.sampling_params_class(**sampling_kwargs)`), so the order keeps the recorded bytes stable and means nothing more.
PARAM_ORDER = ("temperature", "top_p", "top_k", "min_p", "max_new_tokens", "min_new_tokens", "sampling_seed",
               "stop", "stop_token_ids", "ignore_eos", "n", "no_stop_trim")

# Sampling param name -> OpenAI /v1/completions field (same meaning). Citations: "vLLM :N" is vLLM 0.32's
# CompletionRequest field (vllm/entrypoints/openai/completion/protocol.py; the class opens at :48 and hands every one
# of these to SamplingParams in `to_sampling_params`, :343-415); "SGLang :N" is SGLang 0.5.23's CompletionRequest
# field (sglang/srt/entrypoints/openai/protocol.py; the class opens at :365), which its /v1/completions turns back
# into these sampling_params names in serving_completions.py:148-175 (`_build_sampling_params`). vLLM takes every
# field here. SGLang's OpenAI route differs on two: it keeps `no_stop_trim` under SGLang's own name (:406) and has no
# `spaces_between_special_tokens` on completions; a field it does not declare is dropped without a word (the model is
# a plain pydantic BaseModel, :348, whose default ignores unknown fields), so those two do nothing there.
OPENAI_FIELDS = {
    "temperature": "temperature",  # vLLM :71; SGLang :386
    "top_p": "top_p",  # vLLM :72; SGLang :387
    "top_k": "top_k",  # vLLM :77; SGLang :397 (-1: no top-k, SGLang's default)
    "min_p": "min_p",  # vLLM :78; SGLang :398
    "max_new_tokens": "max_tokens",  # vLLM :63 (default 16); SGLang :378, to max_new_tokens at serving_completions.py:153
    "min_new_tokens": "min_tokens",  # vLLM :85; SGLang :399, to min_new_tokens at serving_completions.py:154
    "stop": "stop",  # vLLM :67 (a string or a list: StopParam, vllm/entrypoints/generate/base/protocol.py:26-28); SGLang :382
    "stop_token_ids": "stop_token_ids",  # vLLM :82; SGLang :404
    "ignore_eos": "ignore_eos",  # vLLM :84; SGLang :407
    "n": "n",  # vLLM :64; SGLang :379
    "sampling_seed": "seed",  # vLLM :66; SGLang :381, to sampling_seed at serving_completions.py:173
    "no_stop_trim": "include_stop_str_in_output",  # vLLM :83; SGLang's route has no such field: `no_stop_trim`, :406
    "skip_special_tokens": "skip_special_tokens",  # vLLM :86; SGLang :408
    "spaces_between_special_tokens": "spaces_between_special_tokens",  # vLLM :87; not on SGLang's CompletionRequest
    "repetition_penalty": "repetition_penalty",  # vLLM :79; SGLang :403
    "frequency_penalty": "frequency_penalty",  # vLLM :60; SGLang :375
    "presence_penalty": "presence_penalty",  # vLLM :65; SGLang :380
}


@dataclass(frozen=True)
class Sampling:
    """Sampling parameters; a field left None is not sent (the server's default applies).
    `extra` holds any other field, by SGLang's name, sent after the named ones."""

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    max_new_tokens: int | None = None
    min_new_tokens: int | None = None
    seed: int | None = None
    stop: tuple[str, ...] | None = None
    stop_token_ids: tuple[int, ...] | None = None
    ignore_eos: bool | None = None
    n: int | None = None
    no_stop_trim: bool | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def params(self) -> dict[str, Any]:
        """The fields by SGLang's `sampling_params` names, in wire order, None left out."""
        values = {"temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k, "min_p": self.min_p,
                  "max_new_tokens": self.max_new_tokens, "min_new_tokens": self.min_new_tokens, "sampling_seed": self.seed,
                  "stop": None if self.stop is None else list(self.stop),
                  "stop_token_ids": None if self.stop_token_ids is None else list(self.stop_token_ids),
                  "ignore_eos": self.ignore_eos, "n": self.n, "no_stop_trim": self.no_stop_trim}
        params = {name: values[name] for name in PARAM_ORDER if values[name] is not None}
        params.update(self.extra)
        return params

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Sampling:
        """The inverse of `params` (for a caller that holds a params dict by SGLang's names)."""
        named = {"sampling_seed": "seed"}
        known = {named.get(name, name): value for name, value in params.items() if name in PARAM_ORDER}
        for name in ("stop", "stop_token_ids"):
            value = known.get(name)
            if isinstance(value, str):
                known[name] = (value,)
            elif value is not None:
                known[name] = tuple(value)
        return cls(**known, extra={name: value for name, value in params.items() if name not in PARAM_ORDER})

    def openai_fields(self) -> dict[str, Any]:
        """The same fields by OpenAI /v1/completions names, in `OPENAI_FIELDS` order (the vLLM
        adapter's order before the protocol); extras without an OpenAI name are not sent."""
        params = self.params()
        return {wire: params[name] for name, wire in OPENAI_FIELDS.items() if params.get(name) is not None}


@dataclass(frozen=True)
class GenerationRequest:
    """One prompt to generate from. `logprobs`: the sampled token's logprob at every output position
    (ids arrive twice, so `Generation.token_source_mismatch` can cross-check); `top_logprobs`: that
    many alternatives per position; `logprob_start`: score the prompt from this position on (a
    prefill-only scoring request has `max_new_tokens` 0)."""

    prompt: str | None = None
    prompt_ids: tuple[int, ...] | None = None
    sampling: Sampling = field(default_factory=Sampling)
    logprobs: bool = False
    top_logprobs: int | None = None
    logprob_start: int | None = None
    # SGLang's `token_ids_logprob` (0.5.23 managers/io_struct.py:237): these ids' logprobs at every position.
    token_ids_logprob: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if (self.prompt is None) == (self.prompt_ids is None):
            raise SpecsuiteError("a generation request needs exactly one of a prompt text or prompt ids")
        if self.prompt_ids is not None and not isinstance(self.prompt_ids, tuple):
            object.__setattr__(self, "prompt_ids", tuple(self.prompt_ids))

    @property
    def prompt_value(self) -> str | list[int]:
        """The prompt as JSON wants it: the text, or the ids as a list."""
        return self.prompt if self.prompt is not None else list(self.prompt_ids or ())


@dataclass
class RawAnswer:
    """What one request sent (`wire`, the JSON body) and what the server answered (`raw`, as sent)."""

    wire: dict[str, Any]
    raw: Any


@dataclass
class Answer:
    """One request's typed answer (one Generation per choice: n > 1 gives n) with what went on the
    wire and the raw JSON that came back, for checks that need the server's own words."""

    generations: list[Generation]
    wire: dict[str, Any]
    raw: Any

    @property
    def generation(self) -> Generation:
        """The only Generation of a one-choice answer."""
        if len(self.generations) != 1:
            raise SpecsuiteError(f"expected one generation, the answer has {len(self.generations)}")
        return self.generations[0]


@dataclass(frozen=True)
class NativeGenerationRequest:
    """A call in the native /generate vocabulary, which the integrity suite sends to every kind on purpose (the
    project's recorded vocabulary, so every kind's answer is read by the same rules): one typed request, or a
    native batch of several, each member with its own sampling (SGLang's per-prompt list, even where the members
    agree: the batch probes test the per-prompt path, and vLLM's adapter sends such a batch as one request per prompt)."""

    requests: tuple[GenerationRequest, ...]
    batch: bool = False

    def __post_init__(self) -> None:
        if not self.requests or (not self.batch and len(self.requests) != 1):
            raise SpecsuiteError("a native call is one request, or a batch of at least one")

    @classmethod
    def one(cls, request: GenerationRequest) -> NativeGenerationRequest:
        return cls((request,))

    @classmethod
    def batch_of(cls, requests: Sequence[GenerationRequest]) -> NativeGenerationRequest:
        return cls(tuple(requests), batch=True)

    def payload(self) -> dict[str, Any]:
        """The /generate body (`native_payload`, or `native_batch_payload` with per-prompt sampling)."""
        if self.batch:
            return native_batch_payload(self.requests, per_prompt_sampling=True)
        return native_payload(self.requests[0])


@dataclass(frozen=True)
class NativeReply:
    """The answer to a `NativeGenerationRequest`: the body that stood for it (`wire`) and the native answer as the
    server (or the kind's adapter) gave it (`raw`: an object for one request with n = 1, else a list, prompt-major)."""

    wire: dict[str, Any]
    raw: Any

    @property
    def results(self) -> list[Any]:
        """One native answer object per result, prompt-major (n results per prompt)."""
        return self.raw if isinstance(self.raw, list) else [self.raw]


class NativeCallsThroughPayloads:
    """The protocol's native calls for a client whose raw-answer hooks take a native /generate body: `generate(payload)`
    (the answer as the server, or the kind's adapter, gave it) and `generate_stream(payload)` (its chunks). A checking
    client overrides those hooks, so the typed calls are checked too."""

    def generate(self, payload: dict[str, Any]) -> Any:
        raise NotImplementedError

    def generate_stream(self, payload: dict[str, Any]) -> Iterator[dict[str, Any]]:
        raise NotImplementedError

    def generate_native(self, request: NativeGenerationRequest) -> NativeReply:
        payload = request.payload()
        return NativeReply(payload, self.generate(payload))

    def stream_native(self, request: NativeGenerationRequest) -> Iterator[dict[str, Any]]:
        return self.generate_stream(request.payload())


@runtime_checkable
class GenerationClient(Protocol):
    """Typed generation against one server (the OpenAI-shaped client offers this much). Errors are
    one-line `SpecsuiteError`s; every call has a timeout (`specsuite.server.transport.HttpTransport`)."""

    @property
    def base_url(self) -> str: ...

    def send_request(self, request: GenerationRequest) -> RawAnswer:
        """Send one request (not streamed) and return the raw answer; transport faults raise.
        Kept apart from `parse_answer` so a fault guard can retry the sending and classify an
        unusable answer (`FaultGuard.run(send, validate)`)."""
        ...

    def parse_answer(self, request: GenerationRequest, sent: RawAnswer) -> Answer:
        """The typed answer; an unusable one raises a classified `RequestFault`."""
        ...

    def generate_request(self, request: GenerationRequest) -> Answer:
        """`parse_answer(send_request(request))`."""
        ...

    def generate_requests(self, requests: Sequence[GenerationRequest]) -> list[Answer]:
        """Several requests; one Answer per request, in order (a server kind may batch them)."""
        ...

    def stream_request(self, request: GenerationRequest) -> Iterator[Generation]:
        """Generate streamed: a cumulative Generation per event; the last is the whole answer."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class ServerClient(GenerationClient, Protocol):
    """What a workload may ask of a server kind it runs against (SGLang native, vLLM): typed
    generation plus the tokenizer, the server's facts, the cache flush and the probes."""

    def tokenize(self, text: str, add_special_tokens: bool = True) -> list[int]: ...

    def detokenize(self, ids: list[int], skip_special_tokens: bool = False) -> str: ...

    def detokenize_each(self, ids: list[int], skip_special_tokens: bool = False) -> list[str]: ...

    def model_info(self) -> dict[str, Any]: ...

    def server_info(self) -> dict[str, Any]: ...

    def check_connection(self) -> dict[str, Any]: ...

    def flush_cache(self) -> bool: ...

    def metrics_text(self) -> str | None: ...

    def health(self) -> bool: ...

    def ready(self) -> bool: ...

    def generate_native(self, request: NativeGenerationRequest) -> NativeReply:
        """One native call (a request, or a native batch of them), answered in the native /generate vocabulary
        whatever the kind speaks on the wire (SGLang natively; another kind through its own adapter)."""
        ...

    def stream_native(self, request: NativeGenerationRequest) -> Iterator[dict[str, Any]]:
        """The same call streamed: native chunks (cumulative unless the server streams incrementally; a batch's
        chunks carry `index`). The request is sent now; the reading may be lazy."""
        ...


# -- SGLang native wire ---------------------------------------------------------------------------


def native_payload(request: GenerationRequest) -> dict[str, Any]:
    """SGLang's /generate body for one request (srt/managers/io_struct.py `GenerateReqInput`)."""
    key = "text" if request.prompt is not None else "input_ids"
    payload: dict[str, Any] = {key: request.prompt_value, "sampling_params": request.sampling.params()}
    if request.logprobs:
        payload["return_logprob"] = True
    if request.logprob_start is not None:
        payload["logprob_start_len"] = request.logprob_start
    if request.top_logprobs is not None:
        payload["top_logprobs_num"] = request.top_logprobs
    if request.token_ids_logprob is not None:
        payload["token_ids_logprob"] = list(request.token_ids_logprob)
    return payload


def request_record(request: GenerationRequest) -> dict[str, Any]:
    """A request as the JSONL records keep it (a failed request's `request` field): the project's
    recorded vocabulary, SGLang's field names, whatever server kind it went to."""
    return native_payload(request)


def native_batch_payload(requests: Sequence[GenerationRequest], *, per_prompt_sampling: bool = False) -> dict[str, Any]:
    """One /generate body for several prompts of one kind (all text or all ids) and the same logprob
    flags; shared sampling goes once, differing sampling as SGLang's per-prompt list.
    `per_prompt_sampling`: always the per-prompt list, even where every request samples alike (the
    integrity probes of batches: each member carries its own sampling, so the server's per-prompt
    path is the one tested, and vLLM's native adapter sends such a batch as one request per prompt)."""
    if not requests:
        raise SpecsuiteError("a batch needs at least one request")
    first = requests[0]
    flags = (first.prompt is None, first.logprobs, first.top_logprobs, first.logprob_start, first.token_ids_logprob)
    if any((r.prompt is None, r.logprobs, r.top_logprobs, r.logprob_start, r.token_ids_logprob) != flags for r in requests):
        raise SpecsuiteError("a native batch needs one prompt kind and the same logprob flags on every request")
    payload = native_payload(first)
    key = "text" if first.prompt is not None else "input_ids"
    payload[key] = [r.prompt_value for r in requests]
    params = [r.sampling.params() for r in requests]
    payload["sampling_params"] = params[0] if not per_prompt_sampling and all(p == params[0] for p in params) else params
    return payload
