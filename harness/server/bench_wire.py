"""The serving benchmark's request bodies, per backend: bench_serving's and `vllm bench serve`'s wire.

The bench workload (`harness.workloads.serving.client`) measures streams; it hands over a typed
`GenerationRequest` (the prompt as text or ids; a `Sampling` with temperature, top_p, max_new_tokens
and ignore_eos as the run's flags ask) and a run-wide `BenchWire` (backend, model name, whether the
OpenAI backends get the sampling flags, the extra request body), and gets the bytes to POST.

Why a module of its own and not methods next to each client's body builder: these bodies are the
benchmark tools' (SGLang's `benchmark/serving.py` 0.5.23 and vLLM 0.32's
`benchmarks/lib/endpoint_request_func.py`), not the project's clients': other field order, fields the
clients never send (`best_of`, `repetition_penalty`, `stream_options`), a chat backend no client has,
and bench_serving's sampling rule (below). Held to recorded bytes
(tests/data/protocol_wire/bench_bodies.json, tests/test_protocol_bench_wire.py).

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

from harness.errors import SpecsuiteError
from harness.server.protocol import GenerationRequest, Sampling

BACKENDS = ("sglang", "sglang-oai", "sglang-oai-chat", "vllm")
API_PATHS = {"sglang": "/generate", "sglang-oai": "/v1/completions", "sglang-oai-chat": "/v1/chat/completions", "vllm": "/v1/completions"}
OAI_DEFAULT_TEMPERATURE = 0.0  # what bench_serving's OpenAI request functions send whatever --temperature says
_EXPLICIT_SAMPLING = ("sglang", "vllm")  # backends that always send the temperature (vllm: as `vllm bench serve --temperature`)


@dataclass(frozen=True)
class BenchWire:
    """What every request body of one bench run shares: the backend, the served model's name, whether
    the OpenAI backends send the sampling flags (`oai_sampling`), and the extra body merged last."""

    backend: str
    model: str = "default"
    oai_sampling: bool = False
    extra_body: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise SpecsuiteError(f"unknown backend {self.backend!r}: choose one of {', '.join(BACKENDS)}")

    @property
    def path(self) -> str:
        return API_PATHS[self.backend]

    def sampling_sent(self, sampling: Sampling) -> dict[str, Any]:
        """The sampling fields every request carries, before the extra body is merged (which may
        still override them); top_p is absent when not sent."""
        if self.backend in _EXPLICIT_SAMPLING or self.oai_sampling:
            sent: dict[str, Any] = {"temperature": _temperature(sampling)}
            if _top_p(sampling) < 1.0:
                sent["top_p"] = _top_p(sampling)
            return sent
        return {"temperature": OAI_DEFAULT_TEMPERATURE}

    def ignored_sampling_flags(self, sampling: Sampling) -> list[str]:
        """The --temperature/--top-p values that bench_serving (and so, by default, we) do not send."""
        if self.backend in _EXPLICIT_SAMPLING or self.oai_sampling:
            return []
        ignored = []
        temperature, top_p = _temperature(sampling), _top_p(sampling)
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
        extra = dict(self.extra_body)
        sent = self.sampling_sent(sampling)
        if self.backend == "sglang":
            params: dict[str, Any] = {"temperature": _temperature(sampling), "max_new_tokens": sampling.max_new_tokens,
                                      "ignore_eos": sampling.ignore_eos}
            if "top_p" in sent:
                params["top_p"] = sent["top_p"]
            key = "text" if request.prompt is not None else "input_ids"
            return {key: request.prompt_value, "sampling_params": params, "stream": True, **extra}
        common: dict[str, Any] = {"model": self.model, "stream": True}
        if "temperature" not in extra:
            common["temperature"] = sent["temperature"]
        if "ignore_eos" not in extra and (sampling.ignore_eos or self.backend != "vllm"):
            common["ignore_eos"] = sampling.ignore_eos  # vLLM's client sends the flag only when set
        if "top_p" in sent and "top_p" not in extra:
            common["top_p"] = sent["top_p"]
        if self.backend == "sglang-oai":
            return {**common, "prompt": request.prompt_value, "best_of": 1, "max_tokens": sampling.max_new_tokens, **extra}
        if self.backend == "vllm":
            return {**common, "prompt": request.prompt_value, "repetition_penalty": 1.0, "max_tokens": sampling.max_new_tokens,
                    "stream_options": {"include_usage": True}, "return_token_ids": True, **extra}
        if request.prompt is None:
            raise SpecsuiteError("the chat backend needs text prompts: drop --tokenize-prompt")
        return {**common, "messages": [{"role": "user", "content": request.prompt}],
                "max_completion_tokens": sampling.max_new_tokens, **extra}

    def encode(self, request: GenerationRequest) -> bytes:
        """`body` as the bytes to POST."""
        return orjson.dumps(self.body(request))


def bench_sampling(temperature: float, top_p: float, ignore_eos: bool, max_new_tokens: int | None = None) -> Sampling:
    """The bench flags as a `Sampling` (top_p kept as asked; the wire decides whether it is sent)."""
    return Sampling(temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, ignore_eos=ignore_eos)


def _temperature(sampling: Sampling) -> float:
    return OAI_DEFAULT_TEMPERATURE if sampling.temperature is None else sampling.temperature


def _top_p(sampling: Sampling) -> float:
    return 1.0 if sampling.top_p is None else sampling.top_p
