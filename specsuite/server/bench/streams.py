"""Reading one streamed bench answer, chunk by chunk: what a request measured (`RequestOutput`), the reading state
of one request (`ChunkReading`), and the readers of the OpenAI formats any kind may offer.

Each server kind names, for every bench format it offers, the reader of that format's chunks
(`BenchBackend.read_chunk`; a kind's own formats are read in its folder, e.g.
specsuite/server/kinds/sglang/bench_stream.py); `specsuite.families.bench.client` feeds every parsed chunk to it
with its arrival stamp. The timing rules are bench_serving's (specsuite/families/bench/client.py says them in
full): `read_completions_chunk` (`choices[0].text`) and `read_chat_chunk` (`delta.content` after
`delta.reasoning_content`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RequestOutput:
    """One request's measurements (bench_serving's RequestFuncOutput plus per-chunk data)."""

    prompt_len: int
    success: bool = False
    start_time: float = 0.0
    ttft: float = 0.0
    latency: float = 0.0
    itl: list[float] = field(default_factory=list)
    chunk_itl: list[float] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    text_chunks: list[str] = field(default_factory=list)
    generated_text: str = ""
    output_len: int = 0
    server_prompt_len: int | None = None
    spec_accept_length: float | None = None
    spec_verify_ct: int | None = None
    error: str = ""


class ChunkReading:
    """One request's reading state: its output, the previous counted chunk's stamp and token count, and the texts."""

    def __init__(self, output: RequestOutput, requested_len: int) -> None:
        self.out = output
        self.out.output_len = requested_len
        self.last_stamp = output.start_time
        self.last_tokens = 0
        self.first_seen = False
        self.texts: list[str] = []


def read_usage(state: ChunkReading, data: dict[str, Any]) -> None:
    usage = data.get("usage") or {}
    if usage.get("completion_tokens") is not None:
        state.out.output_len = int(usage["completion_tokens"])
    if usage.get("prompt_tokens"):
        state.out.server_prompt_len = usage["prompt_tokens"]


def _read_openai_text(state: ChunkReading, data: dict[str, Any], stamp: float,
                      text_of: Callable[[dict[str, Any]], str]) -> None:
    read_usage(state, data)
    choices = data.get("choices") or []
    if not choices:
        return
    text = text_of(choices[0])
    if not text:
        return
    if not state.first_seen:
        state.first_seen = True
        state.out.ttft = stamp - state.out.start_time
    else:
        gap = stamp - state.last_stamp
        state.out.itl.append(gap)
        state.out.chunk_itl.append(gap)
        state.out.text_chunks.append(text)
    state.last_stamp = stamp
    state.texts.append(text)


def _completion_text(choice: dict[str, Any]) -> str:
    return choice.get("text") or ""


def _chat_text(choice: dict[str, Any]) -> str:
    delta = choice.get("delta") or {}
    return (delta.get("reasoning_content") or delta.get("reasoning") or "") + (delta.get("content") or "")


def read_completions_chunk(state: ChunkReading, data: dict[str, Any], stamp: float) -> None:
    """A /v1/completions chunk: one ITL entry per non-empty text."""
    _read_openai_text(state, data, stamp, _completion_text)


def read_chat_chunk(state: ChunkReading, data: dict[str, Any], stamp: float) -> None:
    """A /v1/chat/completions chunk: one ITL entry per non-empty delta (reasoning first)."""
    _read_openai_text(state, data, stamp, _chat_text)
