"""The serving bench's reader of SGLang's native /generate stream (the `sglang` backend): cumulative `text` with
`meta_info.completion_tokens`, and the per-request speculation fields SGLang puts in meta_info."""

from __future__ import annotations

from typing import Any

from specsuite.server.bench.streams import ChunkReading


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
