"""A native /generate answer's `meta_info` object (SGLang's names; vLLM's per-step stats under
`vllm_speculative_decoding`) and its `finish_reason` object, parsed into typed fields. Each field holds the
value as the server sent it (None where absent): the workloads check the types they need.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class MetaInfo:
    """The meta_info fields the workloads read."""

    completion_tokens: Any = None
    spec_accept_length: Any = None
    spec_verify_ct: Any = None
    spec_accept_rate: Any = None
    spec_num_correct_drafts: Any = None
    input_top_logprobs: Any = None
    input_token_logprobs: Any = None
    input_token_ids_logprobs: Any = None
    output_top_logprobs: Any = None
    vllm_speculative_decoding: Any = None

    @classmethod
    def parse(cls, meta_info: Mapping[str, Any] | None) -> MetaInfo:
        """The named fields of a meta_info object (None or an empty object: all absent)."""
        meta = meta_info or {}
        return cls(**{spec.name: meta.get(spec.name) for spec in fields(cls)})


@dataclass(frozen=True)
class FinishReason:
    """A finish_reason object: its `type` (stop | length | abort), `matched` (the stop it met) and `message`."""

    type: Any = None
    matched: Any = None
    message: Any = None

    @classmethod
    def parse(cls, finish_reason: Any) -> FinishReason:
        """The fields of a finish_reason object; anything else (None, a string) names none."""
        if not isinstance(finish_reason, Mapping):
            return cls()
        return cls(type=finish_reason.get("type"), matched=finish_reason.get("matched"), message=finish_reason.get("message"))


@dataclass(frozen=True)
class VllmStepStats:
    """vLLM's per-request speculative stats (`vllm_speculative_decoding`): accepted and drafted tokens per step."""

    per_step_accepted: Any = None
    per_step_drafted: Any = None

    @classmethod
    def parse(cls, stats: Any) -> VllmStepStats | None:
        """The stats object's lists; None when it is not an object."""
        if not isinstance(stats, Mapping):
            return None
        return cls(per_step_accepted=stats.get("per_step_accepted"), per_step_drafted=stats.get("per_step_drafted"))


def meta_info_of(answer: Any) -> Any:
    """A raw native /generate answer's meta_info object, as sent; None when the answer is not an object."""
    return answer.get("meta_info") if isinstance(answer, dict) else None
