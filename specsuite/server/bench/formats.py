"""The serving benchmark's request bodies, one builder per wire format (bench_serving's and `vllm bench serve`'s).

Each server kind names the formats it offers (specsuite/server/kinds/); `specsuite.server.bench.wire.BenchWire` picks a
format by its backend name, works out the sampling fields that go out, and calls the builder. A builder gets the
typed request, the served model's name, the sampling fields decided for it (`sent`: temperature, and top_p only
when sent) and the extra body, which it merges last so it wins.

Formats (bench_serving's backend names; sources in specsuite/server/bench/wire.py): `native_body` (SGLang's POST
/generate), `completions_body` (POST /v1/completions), `chat_body` (POST /v1/chat/completions), and
`token_ids_completions_body` (POST /v1/completions as `vllm bench serve` sends it, plus `return_token_ids: true`,
ours, so every chunk names its tokens).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specsuite.errors import SpecsuiteError
from specsuite.server.protocol import GenerationRequest, Sampling

OAI_DEFAULT_TEMPERATURE = 0.0  # what bench_serving's OpenAI request functions send whatever --temperature says


def temperature_of(sampling: Sampling) -> float:
    return OAI_DEFAULT_TEMPERATURE if sampling.temperature is None else sampling.temperature


def top_p_of(sampling: Sampling) -> float:
    return 1.0 if sampling.top_p is None else sampling.top_p


def native_body(request: GenerationRequest, model: str, sent: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """bench_serving's native body: the sampling in `sampling_params`, the prompt as `text` or `input_ids`."""
    sampling = request.sampling
    params: dict[str, Any] = {"temperature": temperature_of(sampling), "max_new_tokens": sampling.max_new_tokens,
                              "ignore_eos": sampling.ignore_eos}
    if "top_p" in sent:
        params["top_p"] = sent["top_p"]
    key = "text" if request.prompt is not None else "input_ids"
    return {key: request.prompt_value, "sampling_params": params, "stream": True, **extra}


def _openai_common(model: str, sampling: Sampling, sent: Mapping[str, Any], extra: Mapping[str, Any], *,
                   ignore_eos_always: bool) -> dict[str, Any]:
    """The fields every OpenAI-shaped bench body opens with; a field of the extra body is left to it."""
    common: dict[str, Any] = {"model": model, "stream": True}
    if "temperature" not in extra:
        common["temperature"] = sent["temperature"]
    if "ignore_eos" not in extra and (sampling.ignore_eos or ignore_eos_always):
        common["ignore_eos"] = sampling.ignore_eos
    if "top_p" in sent and "top_p" not in extra:
        common["top_p"] = sent["top_p"]
    return common


def completions_body(request: GenerationRequest, model: str, sent: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """bench_serving's /v1/completions body."""
    sampling = request.sampling
    common = _openai_common(model, sampling, sent, extra, ignore_eos_always=True)
    return {**common, "prompt": request.prompt_value, "best_of": 1, "max_tokens": sampling.max_new_tokens, **extra}


def chat_body(request: GenerationRequest, model: str, sent: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """bench_serving's /v1/chat/completions body: one user message, so the prompt must be text."""
    sampling = request.sampling
    common = _openai_common(model, sampling, sent, extra, ignore_eos_always=True)
    if request.prompt is None:
        raise SpecsuiteError("the chat backend needs text prompts: drop --tokenize-prompt")
    return {**common, "messages": [{"role": "user", "content": request.prompt}], "max_completion_tokens": sampling.max_new_tokens, **extra}


def token_ids_completions_body(request: GenerationRequest, model: str, sent: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """`vllm bench serve`'s /v1/completions body (its client sends ignore_eos only when set), asking for token ids."""
    sampling = request.sampling
    common = _openai_common(model, sampling, sent, extra, ignore_eos_always=False)
    return {**common, "prompt": request.prompt_value, "repetition_penalty": 1.0, "max_tokens": sampling.max_new_tokens,
            "stream_options": {"include_usage": True}, "return_token_ids": True, **extra}
