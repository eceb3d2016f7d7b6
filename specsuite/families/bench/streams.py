"""Reading one streamed bench answer, chunk by chunk, per wire format: what a request measured (`RequestOutput`),
the reading state of one request (`ChunkReading`), and one chunk reader per format.

Each server kind names, for every bench format it offers, the reader of that format's chunks
(specsuite/server/kinds/); `specsuite.families.bench.client` feeds every parsed chunk to it with its arrival
stamp. The timing rules are bench_serving's (specsuite/families/bench/client.py says them in full):
`read_native_chunk` (cumulative `text` with `meta_info.completion_tokens`), `read_completions_chunk`
(`choices[0].text`), `read_chat_chunk` (`delta.content` after `delta.reasoning_content`) and
`read_token_ids_chunk` (completions chunks that name their tokens in `token_ids`, with the usage chunk's
per-request speculation metrics).
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


def read_native_chunk(state: ChunkReading, data: dict[str, Any], stamp: float) -> None:
    """A native /generate chunk: cumulative text, the token count in meta_info."""
    meta = data.get("meta_info") or {}
    if meta.get("prompt_tokens"):
        state.out.server_prompt_len = meta["prompt_tokens"]
    if meta.get("spec_accept_length") is not None:
        state.out.spec_accept_length = float(meta["spec_accept_length"])
    if meta.get("spec_verify_ct") is not None:
        state.out.spec_verify_ct = int(meta["spec_verify_ct"])
    text = data.get("text")
    if not text:
        return
    tokens = int(meta["completion_tokens"])
    state.out.generated_text = text  # cumulative
    state.out.output_len = tokens
    if not state.first_seen:
        state.first_seen = True
        state.out.ttft = stamp - state.out.start_time
    else:
        new = tokens - state.last_tokens
        if new == 0:
            return  # no token: the gap merges into the next chunk's
        gap = stamp - state.last_stamp
        state.out.itl.extend([gap / new] * new)
        state.out.chunk_itl.append(gap)
        state.out.chunk_tokens.append(new)
    state.last_stamp = stamp
    state.last_tokens = tokens


def _read_usage(state: ChunkReading, data: dict[str, Any]) -> None:
    usage = data.get("usage") or {}
    if usage.get("completion_tokens") is not None:
        state.out.output_len = int(usage["completion_tokens"])
    if usage.get("prompt_tokens"):
        state.out.server_prompt_len = usage["prompt_tokens"]


def _read_openai_text(state: ChunkReading, data: dict[str, Any], stamp: float,
                      text_of: Callable[[dict[str, Any]], str]) -> None:
    _read_usage(state, data)
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


def read_token_ids_chunk(state: ChunkReading, data: dict[str, Any], stamp: float) -> None:
    """A /v1/completions chunk that names its tokens (`token_ids`): the native per-token rule with n = len(token_ids)."""
    _read_usage(state, data)
    spec = (data.get("metrics") or {}).get("speculative_decoding")
    if isinstance(spec, dict):  # only with --per-request-spec-decode-metrics, in the usage chunk
        if spec.get("mean_acceptance_length") is not None:
            state.out.spec_accept_length = float(spec["mean_acceptance_length"])
        if spec.get("num_spec_steps") is not None:
            state.out.spec_verify_ct = int(spec["num_spec_steps"])
    choices = data.get("choices") or []
    if not choices:
        return
    choice = choices[0]
    text = choice.get("text") or ""
    ids = choice.get("token_ids")
    new = len(ids) if isinstance(ids, list) else None  # None: the server sent no token ids
    if (new == 0) or (new is None and not text):
        return  # nothing arrived: the gap merges into the next chunk's
    state.texts.append(text)
    if not state.first_seen:
        state.first_seen = True
        state.out.ttft = stamp - state.out.start_time
    else:
        gap = stamp - state.last_stamp
        n = new or 1
        state.out.itl.extend([gap / n] * n)
        state.out.chunk_itl.append(gap)
        if new is not None:
            state.out.chunk_tokens.append(new)
        state.out.text_chunks.append(text)
    state.last_stamp = stamp
