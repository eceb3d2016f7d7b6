"""The serving bench's reader of vLLM's streamed /v1/completions (the `vllm` backend): chunks that name their
tokens in `token_ids`, and the usage chunk's per-request speculation metrics (`--per-request-spec-decode-metrics`)."""

from __future__ import annotations

from typing import Any

from specsuite.server.bench.streams import ChunkReading, read_usage


def read_token_ids_chunk(state: ChunkReading, data: dict[str, Any], stamp: float) -> None:
    """A /v1/completions chunk that names its tokens (`token_ids`): the native per-token rule with n = len(token_ids)."""
    read_usage(state, data)
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
