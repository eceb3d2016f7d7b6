"""Fit the serving benchmark's lengths to the server's context length.

A request longer than the server allows is refused (a 1,024-token prompt against SGLang with context 1,024 and EAGLE
errors: "The input (1030 tokens) is longer than the model's context length (1024 tokens)"), so the benchmark reads
the limit first and fits its input and output lengths to it.

SGLang (0.5.23): `/server_info` carries `context_length` (the resolved `--context-length`, null when the model's own
is used) and the scheduler's `max_req_input_len` = min(context - 1, KV pool - 1) - 5 (managers/tp_worker.py:568-572;
entrypoints/http_server.py:863-887 with utils/common.py:3584-3593 and managers/scheduler.py:1943-1947). Before a
request is queued the tokenizer manager adds the reserved draft slots R to the input and requires input + R <
context and input + R + max_new_tokens <= context (managers/tokenizer_manager.py:1333-1375); R is
max(topk * steps, draft tokens) under EAGLE, EAGLE3 and FROZEN_KV_MTP, else 0 (managers/utils.py:484-500,
speculative/spec_info.py:102-109); the scheduler refuses an input of max_req_input_len or more
(managers/scheduler.py:3245-3250). Without `context_length`, max_req_input_len + 6 is a lower bound of it.
vLLM: `/v1/models` names `max_model_len`; input + max_tokens must not exceed it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specsuite.errors import SpecsuiteError
from specsuite.server.bench_answers import ModelCard, ServerInfoContext, positive_int

EAGLE_FAMILY = ("EAGLE", "EAGLE3", "FROZEN_KV_MTP", "NEXTN")  # NEXTN resolves to EAGLE in SGLang's server args
# max_req_input_len = min(context - 1, pool - 1) - 5, so context >= max_req_input_len + 6 (tp_worker.py:568-572).
SCHEDULER_MARGIN = 6


@dataclass(frozen=True)
class ContextLimit:
    """What one server allows a request: input + reserved < context_length, input + reserved + output <=
    context_length, and input < max_input_exclusive when the server names one."""

    context_length: int
    reserved: int = 0
    max_input_exclusive: int | None = None
    source: str = ""

    @property
    def max_input(self) -> int:
        """The longest input the server takes."""
        limit = self.context_length - self.reserved - 1
        if self.max_input_exclusive is not None:
            limit = min(limit, self.max_input_exclusive - 1)
        return limit

    @property
    def max_total(self) -> int:
        """The most input + output tokens one request may ask for."""
        return self.context_length - self.reserved

    def describe(self) -> str:
        reserved = f", {self.reserved} reserved for draft tokens" if self.reserved else ""
        return f"context length {self.context_length}{reserved} ({self.source})"


def reserved_draft_slots(server_info: dict[str, Any]) -> int:
    """SGLang's per-request reserved output slots from /server_info's speculative settings."""
    return _reserved_slots(ServerInfoContext.from_server_info(server_info))


def _reserved_slots(info: ServerInfoContext) -> int:
    if info.speculative_algorithm not in EAGLE_FAMILY:
        return 0
    topk = info.eagle_topk or 1
    steps = info.num_steps or 0
    return max(topk * steps, max(info.num_draft_tokens or 0, info.max_num_draft_tokens or 0))


def sglang_context_limit(server_info: dict[str, Any]) -> ContextLimit | None:
    """The limit an SGLang /server_info describes; None when it names neither length."""
    info = ServerInfoContext.from_server_info(server_info)
    context, max_input = info.context_length, info.max_req_input_len
    if context is None and max_input is None:
        return None
    source = "/server_info context_length" if context is not None else "/server_info max_req_input_len + 6"
    if context is None:
        context = max_input + SCHEDULER_MARGIN  # type: ignore[operator]
    return ContextLimit(context, _reserved_slots(info), max_input, source)


def vllm_context_limit(cards: list[dict[str, Any]]) -> ContextLimit | None:
    """The limit vLLM's /v1/models names (`max_model_len` of the first card); None without one."""
    card = ModelCard.first_of(cards)
    length = positive_int(card.max_model_len) if card is not None else None
    return ContextLimit(length, 0, None, "/v1/models max_model_len") if length is not None else None


@dataclass(frozen=True)
class FittedLengths:
    """Input and output lengths after fitting; `note` says what changed (None: nothing)."""

    input_len: int
    output_len: int
    note: str | None = None


def fit_lengths(input_len: int, output_len: int, limit: ContextLimit, *, chosen: bool) -> FittedLengths:
    """Fit the longest request (input_len in, output_len out) into `limit`.

    Lengths the user chose are never changed: a request set that does not fit is refused in one line naming both
    numbers. A profile's defaults are scaled down together, keeping their ratio, to the largest pair that fits.
    """
    if input_len <= limit.max_input and input_len + output_len <= limit.max_total:
        return FittedLengths(input_len, output_len)
    asked = f"input {input_len} + output {output_len} = {input_len + output_len} tokens"
    if chosen:
        raise SpecsuiteError(f"the serving benchmark's {asked} do not fit the server's {limit.describe()}: at most "
                             f"{limit.max_total} tokens with input <= {limit.max_input}; lower --bench-input-len/--bench-output-len")
    scale = min(limit.max_total / (input_len + output_len), limit.max_input / input_len)
    new_input = max(1, int(input_len * scale))
    new_output = max(1, min(int(output_len * scale), limit.max_total - new_input))
    if new_input > limit.max_input or new_input + new_output > limit.max_total:
        raise SpecsuiteError(f"the serving benchmark's {asked} cannot be fitted to the server's {limit.describe()}")
    note = (f"lengths fitted to the server's {limit.describe()}: input {input_len} -> {new_input}, "
            f"output {output_len} -> {new_output}")
    return FittedLengths(new_input, new_output, note)
