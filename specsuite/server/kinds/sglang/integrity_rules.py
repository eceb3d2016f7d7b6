"""Response-integrity checks: pure accounting rules every SGLang `/generate` answer must obey.

Each rule has a name (`CHECKS`) and yields `Violation`s instead of raising, so a workload can record
them and keep going. The rules follow SGLang 0.5.23 (`sglang/srt/managers/tokenizer_manager.py:
_handle_batch_output`, `sglang/srt/managers/schedule_batch.py`, `sglang/srt/entrypoints/http_server.py`):
`output_ids` include the final EOS/stop id while `text` leaves it out; `completion_tokens` counts it; a stop
string is trimmed from `text`, or with `no_stop_trim` the text ends exactly where the stop string ends; `ignore_eos` also disables `stop_token_ids`; a
length finish is `{"type": "length", "length": max_new_tokens}`; native streams are cumulative
(each chunk repeats everything so far) unless the server runs with
`--incremental-streaming-output`, and batch streams carry `index`.

Finish order (schedule_batch.py `Req.update_finish_state`): after each step SGLang tries the stop
strings (in list order), then the stop ids, then the length budget, so a length finish never
leaves a stop string SGLang could see, or a stop id, in the answer. With speculation one step
accepts several ids: when two stop strings complete in it the one listed first wins even if the
other sits earlier in the text. That is SGLang's rule, not a violation (the integrity suite
reports it as a spec/non-spec divergence).

`max_new_tokens: 0` with logprobs: SGLang sends the logprob list up to `max(len(output_ids), 1)`
(output_streamer.py), so an answer with no ids may carry one output logprob entry (the id prefill
sampled, or 0 on the prefill-only path); `output_token_logprobs_length` counts the entries.

Retokenization tolerance ("close"): the text is re-encoded without special tokens and compared with
the ids that produce it — `output_ids` without a trailing matched stop id, and without the ids
`skip_special_tokens` removes. A model may legally emit a non-canonical split ("Whit"+"lock"
where the tokenizer would merge), so counts may differ a little; they may differ by at most
`RETOKENIZE_ABS_SLACK + ceil(RETOKENIZE_REL_SLACK * n)` tokens, n being the id count. Measured on
the reference model: 0 at T=0, up to 5 in 200 at T=1.5. A trimmed stop string is put back before
re-encoding. The check catches ids without text (ids after EOS) and text without ids (leaked text),
not off-by-one counts: those are the exact `completion_tokens` and `logprob_alignment` checks.
"""

from __future__ import annotations

import math
from typing import Any

from specsuite.server.integrity_rules import IntegrityContext, Violation
from specsuite.server.native_answers import is_batch_payload, item_prompt_hash, split_payload, stop_seen_at, stop_strings, stream_finals
from specsuite.server.transport import shorten

RETOKENIZE_ABS_SLACK = 3
RETOKENIZE_REL_SLACK = 0.05
RATE_TOLERANCE = 1e-6
SGLANG_DEFAULT_MAX_NEW_TOKENS = 128
NAN_FINISH = "NaN happened"  # SGLang's finish for an out-of-range sampled id; the detectors own it


# --------------------------------------------------------------------------- one answer
def check_generate(payload: dict[str, Any], response: Any, context: IntegrityContext) -> list[Violation]:
    """Every rule on a non-streamed /generate answer (an object, or a list for a batch / n>1)."""
    items = split_payload(payload)
    answers = response if isinstance(response, list) else [response]
    if len(answers) != len(items):
        return [Violation("response_shape", f"{len(answers)} answers for {len(items)} requested results")]
    found: list[Violation] = []
    for item, answer in zip(items, answers, strict=False):
        found.extend(check_response(item, answer, context))
    return found


def check_response(item: dict[str, Any], answer: Any, context: IntegrityContext) -> list[Violation]:
    """Every rule on one finished answer to one request item (see `split_payload`)."""
    meta_of = answer.get("meta_info") if isinstance(answer, dict) else None
    rid = meta_of.get("id") if isinstance(meta_of, dict) else None
    where = {"rid": rid if isinstance(rid, str) else None, "prompt_hash": item_prompt_hash(item)}
    shape = _shape_problem(answer)
    if shape:
        return [Violation("response_shape", shape, **where)]
    ids: list[int] = answer["output_ids"]
    meta: dict[str, Any] = answer["meta_info"]
    params: dict[str, Any] = item.get("sampling_params") or {}
    found = [
        *(("completion_tokens", m) for m in _completion_tokens(ids, meta)),
        *(("logprob_alignment", m) for m in _logprob_alignment(ids, meta)),
        *(("finish_reason", m) for m in _finish_reason(ids, meta, params)),
        *(("max_new_tokens", m) for m in _max_new_tokens(ids, params)),
        *(("stop_token", m) for m in _stop_token(ids, meta, params, context)),
        *(("stop_string", m) for m in _stop_string(answer.get("text"), ids, meta, params, context)),
        *(("spec_counts", m) for m in _spec_counts(meta, context)),
        *(("retokenize", m) for m in _retokenize(answer.get("text"), ids, meta, params, context)),
    ]
    return [Violation(check, message, **where) for check, message in found]


def _shape_problem(answer: Any) -> str | None:
    if not isinstance(answer, dict):
        return f"answer is {type(answer).__name__}, not an object: {shorten(repr(answer), 80)}"
    ids = answer.get("output_ids")
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        return f"output_ids is not a list of ints: {shorten(repr(ids), 80)}"
    if not isinstance(answer.get("meta_info"), dict):
        return "answer has no meta_info object"
    text = answer.get("text")
    if text is not None and not isinstance(text, str):
        return f"text is {type(text).__name__}, not a string"
    return None


def _tail(ids: list[int], count: int = 6) -> str:
    return f"[{'…, ' if len(ids) > count else ''}{', '.join(map(str, ids[-count:]))}]"


def _completion_tokens(ids: list[int], meta: dict[str, Any]) -> list[str]:
    reported = meta.get("completion_tokens")
    if reported is None:
        return []
    if not isinstance(reported, int) or reported != len(ids):
        return [f"completion_tokens is {reported!r} but output_ids has {len(ids)} ids"]
    return []


def _logprob_alignment(ids: list[int], meta: dict[str, Any]) -> list[str]:
    """One output logprob entry per id, with the same ids; an answer without ids may carry one
    entry (SGLang sends up to max(len(output_ids), 1): the max_new_tokens 0 case), whose id is
    not an output id and is not compared."""
    problems = []
    allowed = {len(ids)} if ids else {0, 1}
    triples = meta.get("output_token_logprobs")
    if triples is not None:
        if not isinstance(triples, list):
            return [f"output_token_logprobs is {type(triples).__name__}, not a list"]
        if len(triples) not in allowed:
            problems.append(f"{len(triples)} output logprobs for {len(ids)} output ids")
        logprob_ids = [t[1] if isinstance(t, list) and len(t) >= 2 else None for t in triples]
        differ = [p for p, (a, b) in enumerate(zip(ids, logprob_ids, strict=False)) if a != b]
        if differ:
            p = differ[0]
            problems.append(f"logprob ids differ from output_ids at {len(differ)} positions, first {p}: {logprob_ids[p]!r} vs {ids[p]}")
    length = meta.get("output_token_logprobs_length")
    # tokenizer_manager.py: output_token_logprobs_length = len(output_token_logprobs)
    expected_length = len(triples) if isinstance(triples, list) else None
    if length is not None and (length != expected_length if expected_length is not None else length not in allowed):
        problems.append(f"output_token_logprobs_length is {length!r} for {len(ids)} output ids"
                        + (f" and {expected_length} output logprobs" if expected_length is not None else ""))
    tops = meta.get("output_top_logprobs")
    if isinstance(tops, list) and len(tops) not in allowed:
        problems.append(f"{len(tops)} output_top_logprobs entries for {len(ids)} output ids")
    return problems


def requested_max_new_tokens(params: dict[str, Any]) -> int | None:
    """The request's budget when it set one; None when left to the server (default or null)."""
    value = params.get("max_new_tokens")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _finish_reason(ids: list[int], meta: dict[str, Any], params: dict[str, Any]) -> list[str]:
    finish = meta.get("finish_reason")
    if not isinstance(finish, dict):
        return [f"finished answer has finish_reason {finish!r}, not an object"]
    kind = finish.get("type")
    if kind == "length":
        length, budget = finish.get("length"), requested_max_new_tokens(params)
        problems = []
        if length != len(ids):
            problems.append(f"length finish says {length!r} but output_ids has {len(ids)} ids")
        if budget is not None and length != budget:
            problems.append(f"length finish says {length!r} but max_new_tokens is {budget}")
        return problems
    if kind == "stop":
        matched = finish.get("matched")
        if not isinstance(matched, (int, str)) or isinstance(matched, bool):
            return [f"stop finish matched {matched!r}: neither a token id nor a string"]
        return []
    if kind == "abort":
        return []
    return [f"finish_reason type {kind!r} is not stop, length or abort"]


def _max_new_tokens(ids: list[int], params: dict[str, Any]) -> list[str]:
    budget = requested_max_new_tokens(params)
    if budget is not None and len(ids) > budget:
        return [f"{len(ids)} output ids exceed max_new_tokens {budget} by {len(ids) - budget}"]
    return []


def _stop_ids(params: dict[str, Any], context: IntegrityContext) -> set[int]:
    listed = params.get("stop_token_ids") or []
    return set(context.eos_ids) | {i for i in listed if isinstance(i, int)}


def _step_span(context: IntegrityContext) -> int:
    """How many ids one step can add: num_draft_tokens with speculation, else 1."""
    k = context.num_draft_tokens
    return k if k is not None and k > 1 else 1


def _stop_token(ids: list[int], meta: dict[str, Any], params: dict[str, Any], context: IntegrityContext) -> list[str]:
    """SGLang's token check (schedule_batch.py `_check_token_based_finish`) finishes on the first
    stop id of a step whatever min_new_tokens says (min_new_tokens only masks their logits), and it
    runs before the length budget. Only a stop string found in the same step wins over it (that
    check runs first), so with stop strings requested a stop id may sit inside the last step."""
    finish = meta.get("finish_reason") if isinstance(meta.get("finish_reason"), dict) else {}
    matched = finish.get("matched")
    on_id = finish.get("type") == "stop" and isinstance(matched, int) and not isinstance(matched, bool)
    problems = []
    if on_id:
        if params.get("ignore_eos"):
            problems.append(f"stopped on id {matched} although ignore_eos disables EOS and stop_token_ids")
        if not ids or ids[-1] != matched:
            after = len(ids) - 1 - ids.index(matched) if matched in ids else None
            extra = f" ({after} ids after it)" if after else ""
            problems.append(f"stop finish matched id {matched} but output_ids end {_tail(ids)}{extra}")
    if not params.get("ignore_eos"):
        stop_ids = _stop_ids(params, context)
        string_may_win = bool(stop_strings(params)) and (finish.get("type") == "length" or isinstance(matched, str))
        last_step_from = len(ids) - _step_span(context) if string_may_win else len(ids)
        early = [p for p, token in enumerate(ids[:-1]) if token in stop_ids and p < last_step_from]
        if early:
            p = early[0]
            problems.append(f"EOS/stop id {ids[p]} at position {p} but generation went on for {len(ids) - 1 - p} more ids")
        if finish.get("type") == "length" and ids and ids[-1] in stop_ids and not string_may_win:
            problems.append(f"length finish although the last id {ids[-1]} is an EOS/stop id: SGLang checks stop ids before the budget")
    return problems


def _stop_string(text: Any, ids: list[int], meta: dict[str, Any], params: dict[str, Any], context: IntegrityContext) -> list[str]:
    """No requested stop string that SGLang would have seen is left in the text, and with
    no_stop_trim the text ends right after the matched one (detokenizer_manager.py
    `trim_matched_stop` cuts at its first occurrence, `output[:end]` or `output[:pos]`)."""
    if not isinstance(text, str):
        return []
    finish = meta.get("finish_reason") if isinstance(meta.get("finish_reason"), dict) else {}
    matched = finish.get("matched")
    requested = stop_strings(params)
    matched_string = matched if finish.get("type") == "stop" and isinstance(matched, str) and matched in requested else None
    problems = []
    body = text
    if params.get("no_stop_trim") and matched_string is not None:
        position = text.find(matched_string)
        if position >= 0:
            body = text[:position]
            extra = len(text) - position - len(matched_string)
            if extra:
                problems.append(f"no_stop_trim: the text goes on {extra} chars past the matched stop string {matched_string!r} "
                                f"at char {position}: {shorten(repr(text[position:position + 40]), 60)}")
    for stop in requested:
        position = body.find(stop)
        if position < 0:
            continue
        if stop != matched_string:
            completed_at = stop_seen_at(stop, ids, context)
            if completed_at is None or _list_order_wins(stop, completed_at, ids, finish, requested, context):
                continue
        around = shorten(repr(text[max(0, position - 30):position + 30]), 90)
        problems.append(f"stop string {stop!r} is in the text at char {position} of {len(text)}: {around}")
    if finish.get("type") == "stop" and isinstance(matched, str) and matched != NAN_FINISH and not params.get("stop_regex") and matched not in requested:
        problems.append(f"stop finish matched {matched!r}, which is not a requested stop string {requested!r}")
    return problems



def _list_order_wins(stop: str, completed_at: int, ids: list[int], finish: dict[str, Any], requested: list[str], context: IntegrityContext) -> bool:
    """SGLang checks stop strings in list order over the step's new ids (schedule_batch.py
    `_check_str_based_finish`): `stop` may stay in the text when it completed in the last step and
    a stop string listed before it won that step (a stop finish on it, or a length finish when it
    lay past the budget, `_cap_finished_len_at_max_new_tokens`)."""
    if completed_at <= len(ids) - _step_span(context):
        return False
    earlier = requested[: requested.index(stop)]
    if finish.get("type") == "stop":
        return finish.get("matched") in earlier
    return finish.get("type") == "length" and bool(earlier)


def _spec_counts(meta: dict[str, Any], context: IntegrityContext) -> list[str]:
    keys = ("spec_num_correct_drafts", "spec_num_proposed_drafts", "spec_accept_rate", "spec_verify_ct")
    if not any(key in meta for key in keys):
        return []
    correct, proposed, rate, verify_ct = (meta.get(key) for key in keys)
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in (correct, proposed, rate, verify_ct)):
        return ["spec statistics incomplete or not finite: " + ", ".join(f"{k}={meta.get(k)!r}" for k in keys)]
    problems = []
    if not 0 <= correct <= proposed:
        problems.append(f"accepted drafts {correct} outside [0, drafted {proposed}]")
    if not 0.0 <= rate <= 1.0:
        problems.append(f"spec_accept_rate {rate} outside [0, 1]")
    if proposed > 0 and abs(rate - correct / proposed) > RATE_TOLERANCE:
        problems.append(f"spec_accept_rate {rate} is not accepted/drafted = {correct}/{proposed}")
    k = context.num_draft_tokens
    if k is not None and k > 1 and proposed != verify_ct * (k - 1):
        problems.append(f"drafted {proposed} != verify steps {verify_ct} x (num_draft_tokens {k} - 1)")
    histogram = meta.get("spec_correct_drafts_histogram")
    if isinstance(histogram, list) and all(isinstance(h, int) for h in histogram):
        if sum(histogram) != verify_ct:
            problems.append(f"accept histogram counts {sum(histogram)} steps, spec_verify_ct is {verify_ct}")
        weighted = sum(count * accepted for accepted, count in enumerate(histogram))
        if weighted != correct:
            problems.append(f"accept histogram sums to {weighted} accepted drafts, spec_num_correct_drafts is {correct}")
    return problems


def text_token_ids(ids: list[int], meta: dict[str, Any], params: dict[str, Any], context: IntegrityContext) -> list[int]:
    """The ids whose text `text` shows: no trailing matched stop id, no ids skip_special_tokens drops."""
    finish = meta.get("finish_reason") if isinstance(meta.get("finish_reason"), dict) else {}
    matched = finish.get("matched")
    shown = ids
    if finish.get("type") == "stop" and isinstance(matched, int) and ids and ids[-1] == matched and not params.get("no_stop_trim"):
        shown = ids[:-1]
    if params.get("skip_special_tokens", True):
        shown = [i for i in shown if i not in context.skipped_ids]
    return shown


def retokenize_slack(count: int) -> int:
    return RETOKENIZE_ABS_SLACK + math.ceil(RETOKENIZE_REL_SLACK * count)


def _retokenize(text: Any, ids: list[int], meta: dict[str, Any], params: dict[str, Any], context: IntegrityContext) -> list[str]:
    if context.encode is None or not isinstance(text, str):
        return []
    finish = meta.get("finish_reason") if isinstance(meta.get("finish_reason"), dict) else {}
    matched = finish.get("matched")
    if finish.get("type") == "stop" and isinstance(matched, str) and matched != NAN_FINISH and not params.get("no_stop_trim"):
        text += matched  # the trimmed stop string was produced by ids too
    shown = text_token_ids(ids, meta, params, context)
    count = len(context.encode(text))
    slack = retokenize_slack(len(shown))
    if abs(count - len(shown)) > slack:
        return [f"text re-encodes to {count} ids but {len(shown)} ids produced it (tolerance {slack}): {shorten(repr(text[-60:]), 80)}"]
    return []


# --------------------------------------------------------------------------- streams
def check_stream(payload: dict[str, Any], chunks: list[dict[str, Any]], context: IntegrityContext) -> list[Violation]:
    """The streaming rules on a complete stream (every chunk before `[DONE]`), then every answer
    rule on what each request's stream adds up to."""
    items = split_payload(payload)
    batch = is_batch_payload(payload)
    found: list[Violation] = []
    per_item: list[list[tuple[int, dict[str, Any]]]] = [[] for _ in items]
    for position, chunk in enumerate(chunks):
        index = chunk.get("index") if batch else 0
        if batch and (not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(items)):
            found.append(Violation("stream_index", f"chunk {position} of a {len(items)}-result batch stream has index {chunk.get('index')!r}"))
            continue
        per_item[index].append((position, chunk))
    for index, (item, item_chunks) in enumerate(zip(items, per_item, strict=True)):
        where = {"prompt_hash": item_prompt_hash(item)}
        if not item_chunks:
            found.append(Violation("stream_index", f"result {index} of {len(items)} never appeared in the stream", **where))
            continue
        found.extend(Violation(check, message, **where) for check, message in _stream_rules(item_chunks, context.incremental_streaming))
    if any(v.check == "stream_index" for v in found):
        return found
    for item, final in zip(items, stream_finals(payload, chunks, context.incremental_streaming), strict=False):
        if final is not None:
            found.extend(check_response(item, final, context))
    return found


def _stream_rules(chunks: list[tuple[int, dict[str, Any]]], incremental: bool) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    finishes = [position for position, chunk in chunks if isinstance(chunk.get("meta_info"), dict) and chunk["meta_info"].get("finish_reason") is not None]
    last_position = chunks[-1][0]
    if len(finishes) != 1:
        problems.append(("stream_finish", f"{len(finishes)} chunks carry a finish_reason (stream positions {finishes[:5]}), expected exactly 1"))
    elif finishes[0] != last_position:
        problems.append(("stream_finish", f"finish_reason arrived at stream position {finishes[0]}, before the request's last chunk at {last_position}"))
    if incremental:
        return problems
    previous_text, previous_ids = "", []
    for position, chunk in chunks:
        text = chunk.get("text") if isinstance(chunk.get("text"), str) else ""
        ids = chunk.get("output_ids") if isinstance(chunk.get("output_ids"), list) else []
        if not text.startswith(previous_text):
            cut = next((i for i, (a, b) in enumerate(zip(previous_text, text, strict=False)) if a != b), min(len(previous_text), len(text)))
            problems.append(("stream_cumulative", f"cumulative text at stream position {position} rewrites char {cut}: "
                             f"{shorten(repr(previous_text[cut:cut + 30]), 40)} became {shorten(repr(text[cut:cut + 30]), 40)} "
                             f"({len(previous_text)} -> {len(text)} chars)"))
            break
        if ids[: len(previous_ids)] != previous_ids:
            problems.append(("stream_cumulative", f"cumulative output_ids at stream position {position} do not extend the previous "
                             f"{len(previous_ids)} ids ({len(ids)} ids now)"))
            break
        previous_text, previous_ids = text, ids
    return problems
