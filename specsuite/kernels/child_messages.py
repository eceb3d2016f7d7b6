"""The vLLM sampler child's protocol (specsuite.kernels.vllm_child), parsed on the parent's side: its start-up line,
its answer to a sample request, and the output file an answer names."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class ChildReady:
    """The start-up line: whether the sampler started, why not (`error`, else the whole line), vLLM's version and
    the device, as sent; `line` is the whole line, which the loaded kernel keeps as its details."""

    ready: bool
    failure: Any
    vllm: Any
    device: Any
    line: dict[str, Any]

    @classmethod
    def parse(cls, line: dict[str, Any]) -> ChildReady:
        return cls(ready=bool(line.get("ready")), failure=line.get("error", line), vllm=line.get("vllm"),
                   device=line.get("device"), line=line)


@dataclass(frozen=True)
class ChildAnswer:
    """The answer to one sample request: whether the output file is complete, and why not (`error`, else the line)."""

    ok: bool
    failure: Any

    @classmethod
    def parse(cls, line: dict[str, Any]) -> ChildAnswer:
        return cls(ok=bool(line.get("ok")), failure=line.get("error", line))


def sampled_token_ids(output: Mapping[str, np.ndarray]) -> np.ndarray:
    """The output file's (B, k+1) token ids, -1 past the committed tokens."""
    return output["output_token_ids"]
