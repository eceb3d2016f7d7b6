"""Build SGLang-shaped /generate results (text, output_ids, meta_info) from engine requests."""

from __future__ import annotations

import time
from typing import Any

from specsuite.refserver.engine_request import EngineRequest
from specsuite.refserver.model_loading import ReferenceModel

FLOAT32_MIN = -3.4028234663852886e38  # SGLang clamps logprobs here: -inf never appears


def _clamp_logprob(value: float | None) -> float | None:
    return None if value is None else max(value, FLOAT32_MIN)


def visible_ids(request: EngineRequest, count: int | None = None) -> list[int]:
    """The output ids whose text is shown: a matched EOS/stop id is left out (unless no_stop_trim)."""
    ids = request.output_ids[:count] if count is not None else list(request.output_ids)
    reason = request.finish_reason
    finished_on_id = reason is not None and reason.get("type") == "stop" and isinstance(reason.get("matched"), int)
    if finished_on_id and count is None and not request.sampling.no_stop_trim and ids:
        ids = ids[:-1]
    return ids


# schedule_batch.py INIT_INCREMENTAL_DETOKENIZATION_OFFSET: prompt ids decoded in front of the output.
TEXT_CONTEXT_IDS = 5


def output_text(model: ReferenceModel, request: EngineRequest, count: int | None = None) -> str:
    """Detokenized text as SGLang's detokenizer shows it: the ids decoded after the last few
    prompt ids, keeping what they add (detokenizer_manager.py `read_texts[i][len(surr_texts[i]):]`),
    and once finished on a stop string cut at its first occurrence, before it or, with
    no_stop_trim, right after it (`trim_matched_stop`)."""
    skip = request.sampling.skip_special_tokens
    context = [int(i) for i in request.prompt_ids[max(len(request.prompt_ids) - TEXT_CONTEXT_IDS, 0):]]
    shown = len(model.decode_text(context, skip)) if context else 0
    text = model.decode_text([*context, *visible_ids(request, count)], skip)[shown:]
    reason = request.finish_reason
    if count is None and reason is not None and reason.get("type") == "stop" and isinstance(reason.get("matched"), str):
        stop = reason["matched"]
        position = text.find(stop)
        if position >= 0:
            text = text[: position + len(stop)] if request.sampling.no_stop_trim else text[:position]
    return text


def streamable_text(model: ReferenceModel, request: EngineRequest, count: int) -> str:
    """Text safe to stream before the finish: holds back a partial UTF-8 character and any tail
    that could still become a stop string, so cumulative text never has to be rewritten."""
    text = output_text(model, request, count).rstrip("\ufffd")
    held = 0
    for stop in request.sampling.stop:
        for length in range(min(len(stop), len(text)), 0, -1):
            if text.endswith(stop[:length]):
                held = max(held, length)
                break
    return text[: len(text) - held] if held else text


def _triples(model: ReferenceModel, values: list[float | None], ids: list[int], with_text: bool) -> list[list[Any]]:
    return [
        [_clamp_logprob(v), int(i), model.decode_unclamped([int(i)], False) if with_text else None]
        for v, i in zip(values, ids, strict=False)
    ]


def _top_triples(model: ReferenceModel, tops: list, with_text: bool) -> list[Any]:
    out: list[Any] = []
    for position in tops:
        if position is None:
            out.append(None)
        else:
            out.append(_triples(model, [v for v, _ in position], [i for _, i in position], with_text))
    return out


def meta_info(model: ReferenceModel, request: EngineRequest, count: int, num_draft_tokens: int, first_chunk: bool) -> dict[str, Any]:
    """meta_info for the first `count` output ids (all of them once finished)."""
    finished = request.finish_reason is not None and count >= len(request.output_ids)
    meta: dict[str, Any] = {
        "id": request.rid,
        "finish_reason": request.finish_reason if finished else None,
        "prompt_tokens": len(request.prompt_ids),
        "completion_tokens": count,
        "cached_tokens": 0,
        "reasoning_tokens": 0,
        "weight_version": "default",
        "num_retractions": 0,
    }
    if first_chunk:
        meta["response_sent_to_client_ts"] = time.time()
    options = request.logprobs
    if options.return_logprob:
        with_text = options.return_text_in_logprobs
        start = max(options.logprob_start_len, 0)
        prompt_ids = [int(i) for i in request.prompt_ids[start:]] if options.logprob_start_len >= 0 else []
        meta["input_token_logprobs"] = _triples(model, request.input_logprobs, prompt_ids, with_text)
        logprob_ids, logprob_count = request.output_ids[:count], count
        if finished and count == 0 and request.logprob_only_token is not None:
            # SGLang sends output logprobs up to max(len(output_ids), 1) (output_streamer.py): a
            # max_new_tokens 0 answer carries the dropped prefill sample's entry.
            logprob_ids, logprob_count = [request.logprob_only_token], 1
        meta["output_token_logprobs"] = _triples(model, request.output_logprobs[:logprob_count], logprob_ids, with_text)
        meta["output_token_logprobs_length"] = len(meta["output_token_logprobs"])
        if options.top_logprobs_num > 0:
            meta["input_top_logprobs"] = _top_triples(model, request.input_top_logprobs, with_text)
            meta["output_top_logprobs"] = _top_triples(model, request.output_top_logprobs[:logprob_count], with_text)
        if options.token_ids_logprob is not None:
            # The requested ids' logprobs at every input position, the first null (0.5.23 tokenizer_manager.py:2974-3004).
            # This server does not compute them for output positions: output_token_ids_logprobs is left out.
            meta["input_token_ids_logprobs"] = _top_triples(model, request.input_token_ids_logprobs, with_text)
    if finished:
        meta["e2e_latency"] = (request.finished_at or time.time()) - request.created_at
        meta["weight_versions"] = [{"version": "default", "start": 0, "end": count}]
        if request.verify_ct > 0 and num_draft_tokens > 1:
            proposed = request.verify_ct * (num_draft_tokens - 1)
            meta["spec_verify_ct"] = request.verify_ct
            meta["spec_accept_length"] = count / request.verify_ct
            meta["spec_accept_rate"] = request.num_correct_drafts / proposed
            meta["spec_num_correct_drafts"] = request.num_correct_drafts
            meta["spec_num_proposed_drafts"] = proposed
            if request.correct_drafts_histogram:
                meta["spec_correct_drafts_histogram"] = list(request.correct_drafts_histogram)
    return meta


def generate_result(model: ReferenceModel, request: EngineRequest, num_draft_tokens: int, first_chunk: bool = True) -> dict[str, Any]:
    """The finished, non-streamed /generate object for one request."""
    count = len(request.output_ids)
    return {
        "text": output_text(model, request),
        "output_ids": list(request.output_ids),
        "meta_info": meta_info(model, request, count, num_draft_tokens, first_chunk),
    }
