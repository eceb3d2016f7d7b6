"""Sampling requests that leave the server nothing to default: the target of a test is the request it sent.

A field a request omits is filled by the server, and not always with the neutral value: vLLM 0.32 fills every field
of its list (`ServerKind.model_sampling_defaults`) from the model's generation_config.json (`--generation-config auto`,
vllm/config/model.py:1847-1902, the list at :1869-1878; applied "user -> server default -> OpenAI default" in
entrypoints/openai/completion/protocol.py:351-359), so a Qwen2.5-Instruct checkpoint samples with repetition_penalty
1.05 unless the request says 1.0. A test that judges the server against the plain softmax would then fail a correct
server. `pinned` sends every such field: the value the test means, else the neutral one (docs/logprob_semantics.md,
"Off" values: SGLang 0.5.23 SamplingParams, srt/sampling/sampling_params.py:157-164; vLLM 0.32 CompletionRequest
`_DEFAULT_SAMPLING_PARAMS`, entrypoints/openai/completion/protocol.py:303-311, top_k -1 read as off at
sampling_params.py:315-317).

`model_generation_defaults` reads what the server would have filled in, from the model folder's generation_config.json
when the test machine holds it (the same local folder the vocabulary is read from; never downloaded): the record
shows it beside the parameters that overrode it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from specsuite.errors import SpecsuiteError
from specsuite.server.protocol import Sampling

# Neutral values by SGLang's sampling_params names. top_k -1: "no top-k" for SGLang (stored as 1 << 30) and vLLM alike.
NEUTRAL = {"top_p": 1.0, "top_k": -1, "min_p": 0.0, "frequency_penalty": 0.0, "presence_penalty": 0.0, "repetition_penalty": 1.0}
PENALTIES = ("frequency_penalty", "presence_penalty", "repetition_penalty")
GENERATION_CONFIG = "generation_config.json"


def pinned(sampling: Sampling) -> Sampling:
    """`sampling` with every field a server may default set: its own value where it has one, else the neutral value.
    The temperature and the token budget are the test's to choose: a request without them is refused."""
    if sampling.temperature is None or sampling.max_new_tokens is None:
        raise SpecsuiteError("a pinned sampling request needs its temperature and max_new_tokens")
    extra = {name: sampling.extra.get(name, NEUTRAL[name]) for name in PENALTIES}
    extra.update(sampling.extra)
    return replace(sampling, top_p=NEUTRAL["top_p"] if sampling.top_p is None else sampling.top_p,
                   top_k=NEUTRAL["top_k"] if sampling.top_k is None else sampling.top_k,
                   min_p=NEUTRAL["min_p"] if sampling.min_p is None else sampling.min_p, extra=extra)


def unpinned(params: Mapping[str, Any], fields: Iterable[str]) -> list[str]:
    """The fields of `fields` that a request with these sampling params (SGLang's names) leaves to the server."""
    return [name for name in fields if params.get(name) is None]


def model_generation_defaults(folders: Iterable[Any], fields: Iterable[str]) -> dict[str, Any] | None:
    """The `fields` the first readable generation_config.json among these local model folders sets (max_new_tokens
    included, by its Hugging Face name); None when no folder holds one."""
    for folder in folders:
        if not folder:
            continue
        try:
            config = json.loads((Path(str(folder)) / GENERATION_CONFIG).read_text())
        except (OSError, ValueError):
            continue
        if isinstance(config, dict):
            return {name: config[name] for name in fields if config.get(name) is not None}
    return None
