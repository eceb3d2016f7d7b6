"""`Generation`: one generated response, normalised from either API into a single JSON-friendly record.

Token source rule: every native request asks for `return_logprob`, so the generated ids arrive twice,
as `output_ids` and as the ids inside the `meta_info.output_token_logprobs` triples
`[logprob, id, text]`. Both are kept; `token_source_mismatch()` lists where they disagree, which is
itself a server bug (the two lists are documented to align one to one, EOS included).

The bulky `output_token_logprobs` list is removed from the stored `meta_info` because its content
lives in `output_logprobs` and `logprob_ids`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from specsuite.errors import SpecsuiteError
from specsuite.server.transport import int_list, shorten

BULKY_META_KEYS = ("output_token_logprobs",)


def prompt_hash(prompt: str | None, prompt_ids: list[int] | None) -> str:
    """First 16 hex digits of sha256 over the prompt text (UTF-8), else over the ids as compact JSON."""
    if prompt is not None:
        data = prompt.encode("utf-8")
    elif prompt_ids is not None:
        data = json.dumps(prompt_ids, separators=(",", ":")).encode()
    else:
        data = b""
    return hashlib.sha256(data).hexdigest()[:16]


@dataclass
class Generation:
    """One response. `output_ids` is None only when the API returned no ids (OpenAI route without
    `return_token_ids`); then only text detectors apply."""

    prompt: str | None
    prompt_ids: list[int] | None
    prompt_hash: str
    params: dict[str, Any]
    output_ids: list[int] | None
    text: str
    output_logprobs: list[float | None] | None = None
    logprob_ids: list[int] | None = None
    finish_reason: dict[str, Any] | None = None
    completion_tokens: int | None = None
    meta_info: dict[str, Any] = field(default_factory=dict)

    @property
    def generated_token_count(self) -> int:
        """Generated tokens: completion_tokens when reported, else the number of ids, else 0."""
        if self.completion_tokens is not None:
            return self.completion_tokens
        if self.output_ids is not None:
            return len(self.output_ids)
        return 0

    def token_source_mismatch(self) -> list[int]:
        """Positions where `output_ids` and the logprob ids disagree, including every position past
        the shorter list when the lengths differ. Empty when either source is missing, and for an
        answer without ids that carries one logprob entry: SGLang sends max(len(output_ids), 1)
        entries (output_streamer.py), the max_new_tokens 0 case."""
        if self.output_ids is None or self.logprob_ids is None:
            return []
        if not self.output_ids and len(self.logprob_ids) <= 1:
            return []
        common = min(len(self.output_ids), len(self.logprob_ids))
        mismatched = [i for i in range(common) if self.output_ids[i] != self.logprob_ids[i]]
        longest = max(len(self.output_ids), len(self.logprob_ids))
        return mismatched + list(range(common, longest))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (one JSONL line per generation)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Generation:
        """Inverse of `to_dict`, for reading results back."""
        return cls(**data)

    @classmethod
    def from_sglang(cls, payload_item: dict[str, Any], response_item: dict[str, Any]) -> Generation:
        """Build from one native /generate request item and its response object.

        `payload_item` is the request for this one response: `text` or `input_ids` for a single
        prompt, and its `sampling_params` object. Use `generations_from_sglang` to split a batch.
        """
        if not isinstance(response_item, dict):
            raise SpecsuiteError(f"/generate result is not an object: {shorten(repr(response_item), 80)}")
        meta = response_item.get("meta_info")
        if not isinstance(meta, dict):
            raise SpecsuiteError("/generate result has no meta_info object")
        output_ids = int_list(response_item.get("output_ids"), "/generate output_ids")
        logprobs, logprob_ids = _split_triples(meta.get("output_token_logprobs"))
        prompt = payload_item.get("text")
        prompt_ids = payload_item.get("input_ids")
        return cls(
            prompt=prompt,
            prompt_ids=prompt_ids,
            prompt_hash=prompt_hash(prompt, prompt_ids),
            params=dict(payload_item.get("sampling_params") or {}),
            output_ids=output_ids,
            text=response_item.get("text", ""),
            output_logprobs=logprobs,
            logprob_ids=logprob_ids,
            finish_reason=meta.get("finish_reason"),
            completion_tokens=meta.get("completion_tokens"),
            meta_info={k: v for k, v in meta.items() if k not in BULKY_META_KEYS},
        )


def _split_triples(triples: Any) -> tuple[list[float | None] | None, list[int] | None]:
    """Logprobs and ids out of `[logprob, id, text]` triples; (None, None) when not requested."""
    if triples is None:
        return None, None
    if not isinstance(triples, list) or not all(isinstance(t, list) and len(t) >= 2 for t in triples):
        raise SpecsuiteError(f"output_token_logprobs is not a list of triples: {shorten(repr(triples), 80)}")
    logprobs = [t[0] for t in triples]
    ids = int_list([t[1] for t in triples], "output_token_logprobs ids")
    return logprobs, ids


def generations_from_sglang(
    payload: dict[str, Any], response: dict[str, Any] | list[dict[str, Any]]
) -> list[Generation]:
    """Split a native /generate request and its response into one Generation per response object.

    Handles a single prompt, a batch (`text` list or `input_ids` list of lists), a per-prompt
    `sampling_params` list, and n>1, where results come prompt-major (result k belongs to prompt k // n).
    """
    items = response if isinstance(response, list) else [response]
    prompts, prompt_key = _prompts_of(payload)
    params = payload.get("sampling_params") or {}
    params_list = params if isinstance(params, list) else [params] * len(prompts)
    if len(params_list) != len(prompts):
        raise SpecsuiteError(
            f"/generate payload has {len(params_list)} sampling_params for {len(prompts)} prompts"
        )
    if len(items) % len(prompts) != 0:
        raise SpecsuiteError(f"/generate returned {len(items)} results for {len(prompts)} prompts")
    per_prompt = len(items) // len(prompts)
    generations = []
    for k, item in enumerate(items):
        index = k // per_prompt
        payload_item = {prompt_key: prompts[index], "sampling_params": params_list[index]}
        generations.append(Generation.from_sglang(payload_item, item))
    return generations


def _prompts_of(payload: dict[str, Any]) -> tuple[list[Any], str]:
    """The list of prompts in a native payload, and the key they came from."""
    if "text" in payload and payload["text"] is not None:
        text = payload["text"]
        return (text if isinstance(text, list) else [text]), "text"
    ids = payload.get("input_ids")
    if isinstance(ids, list) and ids and isinstance(ids[0], list):
        return ids, "input_ids"
    if isinstance(ids, list):
        return [ids], "input_ids"
    raise SpecsuiteError("/generate payload has neither text nor input_ids")
