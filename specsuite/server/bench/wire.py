"""The serving benchmark's request bodies, per backend: bench_serving's and `vllm bench serve`'s wire.

The bench workload (`specsuite.families.bench.client`) measures streams; it hands over a typed
`GenerationRequest` (the prompt as text or ids; a `Sampling` with temperature, top_p, max_new_tokens
and ignore_eos as the run's flags ask) and a run-wide `BenchWire` (backend, model name, whether the
OpenAI backends get the sampling flags, the extra request body), and gets the bytes to POST. The
backend names a format that a server kind offers (`specsuite.server.kinds`: its path, whether it always
sends the sampling flags, and its body builder in `specsuite.server.bench.formats`).

Why a module of its own and not methods next to each client's body builder: these bodies are the
benchmark tools' (SGLang's `benchmark/serving.py` 0.5.23 and vLLM 0.32's
`benchmarks/lib/endpoint_request_func.py`), not the project's clients': other field order, fields the
clients never send (`best_of`, `repetition_penalty`, `stream_options`), a chat backend no client has,
and bench_serving's sampling rule (below). Held to recorded bytes
(tests/data/protocol_wire/bench_bodies.json, tests/server/test_protocol_bench_wire.py).

Backends (bench_serving's names): `sglang` (native POST /generate), `sglang-oai` (POST
/v1/completions), `sglang-oai-chat` (POST /v1/chat/completions), `vllm` (POST /v1/completions as
`vllm bench serve` sends it, plus `return_token_ids: true`, ours, so every chunk names its tokens).

Sampling, as bench_serving sends it (`benchmark/serving.py` 0.5.23): the native backend puts the
temperature in `sampling_params` and `top_p` only when below 1 (lines 699-706); the OpenAI backends
send `temperature: 0.0` and no `top_p` whatever the flags say, unless the extra body has them
(completions lines 311-313, chat 471-473; bench_serving's own vllm and lmdeploy backends use those
two functions). `oai_sampling` (ours) sends the flags on the OpenAI backends too. The vllm backend
always sends the temperature, and top_p when below 1. The extra body is merged last and wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from specsuite.errors import SpecsuiteError
from specsuite.server import kinds
from specsuite.server.bench.formats import OAI_DEFAULT_TEMPERATURE, temperature_of, top_p_of
from specsuite.server.protocol import GenerationRequest, Sampling


@dataclass(frozen=True)
class BenchWire:
    """What every request body of one bench run shares: the backend, the served model's name, whether
    the OpenAI backends send the sampling flags (`oai_sampling`), and the extra body merged last."""

    backend: str
    model: str = "default"
    oai_sampling: bool = False
    extra_body: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        kinds.bench_backend(self.backend)  # an unknown name is refused here, in one line

    @property
    def format(self) -> kinds.BenchBackend:
        return kinds.bench_backend(self.backend)

    @property
    def path(self) -> str:
        return self.format.path

    def _sends_flags(self) -> bool:
        return self.format.sends_sampling_flags or self.oai_sampling

    def sampling_sent(self, sampling: Sampling) -> dict[str, Any]:
        """The sampling fields every request carries, before the extra body is merged (which may
        still override them); top_p is absent when not sent."""
        if self._sends_flags():
            sent: dict[str, Any] = {"temperature": temperature_of(sampling)}
            if top_p_of(sampling) < 1.0:
                sent["top_p"] = top_p_of(sampling)
            return sent
        return {"temperature": OAI_DEFAULT_TEMPERATURE}

    def ignored_sampling_flags(self, sampling: Sampling) -> list[str]:
        """The --temperature/--top-p values that bench_serving (and so, by default, we) do not send."""
        if self._sends_flags():
            return []
        ignored = []
        temperature, top_p = temperature_of(sampling), top_p_of(sampling)
        if temperature != OAI_DEFAULT_TEMPERATURE and "temperature" not in self.extra_body:
            ignored.append(f"--temperature {temperature:g}")
        if top_p < 1.0 and "top_p" not in self.extra_body:
            ignored.append(f"--top-p {top_p:g}")
        return ignored

    def body(self, request: GenerationRequest) -> dict[str, Any]:
        """The request body this backend's bench client sends (the extra body merged last)."""
        sampling = request.sampling
        if sampling.max_new_tokens is None or sampling.ignore_eos is None:
            raise SpecsuiteError("a bench request needs max_new_tokens and ignore_eos in its sampling")
        return self.format.body(request, self.model, self.sampling_sent(sampling), dict(self.extra_body))

    def encode(self, request: GenerationRequest) -> bytes:
        """`body` as the bytes to POST."""
        return orjson.dumps(self.body(request))


def bench_sampling(temperature: float, top_p: float, ignore_eos: bool, max_new_tokens: int | None = None) -> Sampling:
    """The bench flags as a `Sampling` (top_p kept as asked; the wire decides whether it is sent)."""
    return Sampling(temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, ignore_eos=ignore_eos)
