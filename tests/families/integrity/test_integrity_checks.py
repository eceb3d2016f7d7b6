"""The integrity checks on hand-built answers: each rule passes a well-formed answer and fires on
the one thing it guards, with the numbers in its message; plus payload splitting, stream rules,
answer comparison, canaries, the recorder and the local tokenizer."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from specsuite.errors import SpecsuiteError
from specsuite.families.integrity.comparisons import compare_answers, find_canary_leaks, make_canaries
from specsuite.families.integrity.native_answer import NativeAnswer
from specsuite.families.integrity.recorder import IntegrityRecorder
from specsuite.server.integrity_rules import CHECKS, IntegrityContext
from specsuite.server.kinds.sglang.integrity_rules import check_generate, check_response, check_stream, retokenize_slack
from specsuite.server.native_answers import is_batch_payload, split_payload, stream_finals
from specsuite.server.tokenizer import load_tokenizer

MODEL_DIR = Path(__file__).resolve().parents[3] / "specsuite/refserver/model"
EOS = 8091
TOKENIZER = load_tokenizer(str(MODEL_DIR))


def encode(text: str) -> list[int]:
    """Ids of `text` without special tokens, as the integrity checks re-encode it."""
    return TOKENIZER.encode(text, add_special_tokens=False)


CONTEXT = IntegrityContext(eos_ids=frozenset({EOS}), skipped_ids=TOKENIZER.special_ids, encode=encode,
                           decode=TOKENIZER.decode, num_draft_tokens=6)
TEXT = " The farm was built in 1111 and rebuilt 84 years later."
IDS = encode(TEXT)


def item(**params) -> dict:
    return {"text": "prompt", "sampling_params": {"temperature": 0, **params}, "return_logprob": True}


def answer(ids: list[int], text: str, finish: dict | None, **meta) -> dict:
    info = {"id": "rid-1", "finish_reason": finish, "completion_tokens": len(ids),
            "output_token_logprobs": [[-0.5, i, None] for i in ids], "output_token_logprobs_length": len(ids), **meta}
    return {"text": text, "output_ids": list(ids), "meta_info": info}


def fired(found) -> set[str]:
    return {v.check for v in found}


def eos_answer() -> dict:
    return answer(IDS + [EOS], TEXT, {"type": "stop", "matched": EOS})


def spec_meta() -> dict:
    """Consistent spec statistics for k=6: 4 verify steps accepting 0, 2, 4 and 4 of 5 drafts."""
    return {"spec_verify_ct": 4, "spec_num_correct_drafts": 10, "spec_num_proposed_drafts": 20,
            "spec_accept_rate": 0.5, "spec_correct_drafts_histogram": [1, 0, 1, 0, 2, 0]}


# --------------------------------------------------------------------------- well-formed answers pass
@pytest.mark.parametrize("case", ["eos", "length", "stop_string", "stop_id", "spec"])
def test_well_formed_answers_pass_every_check(case):
    if case == "eos":
        request, result = item(max_new_tokens=64), eos_answer()
    elif case == "length":
        request, result = item(max_new_tokens=len(IDS)), answer(IDS, TEXT, {"type": "length", "length": len(IDS)})
    elif case == "stop_string":
        cut = TEXT.index(" and")
        request, result = item(stop=[" and"]), answer(encode(TEXT[: cut + 4]), TEXT[:cut], {"type": "stop", "matched": " and"})
    elif case == "stop_id":
        request, result = item(stop_token_ids=[IDS[3]]), answer(IDS[:4], TOKENIZER.decode(IDS[:3], True), {"type": "stop", "matched": IDS[3]})
    else:
        request, result = item(), answer(IDS + [EOS], TEXT, {"type": "stop", "matched": EOS}, **spec_meta())
    assert check_response(request, result, CONTEXT) == []


# --------------------------------------------------------------------------- each rule fires
def test_completion_tokens_must_count_the_ids():
    result = eos_answer()
    result["meta_info"]["completion_tokens"] += 1
    found = check_response(item(), result, CONTEXT)
    assert fired(found) == {"completion_tokens"}
    assert f"but output_ids has {len(IDS) + 1} ids" in found[0].message and found[0].rid == "rid-1"


def test_logprobs_must_align_with_ids():
    result = eos_answer()
    result["meta_info"]["output_token_logprobs"].pop()
    result["meta_info"]["output_token_logprobs"][0][1] = 5
    result["meta_info"]["output_token_logprobs_length"] = 3
    messages = [v.message for v in check_response(item(), result, CONTEXT)]
    assert any(f"{len(IDS)} output logprobs for {len(IDS) + 1} output ids" in m for m in messages)
    assert any("first 0: 5 vs" in m for m in messages)
    assert any("output_token_logprobs_length" in m for m in messages)


def test_ids_after_eos_fire_the_stop_token_rule():
    result = answer(IDS + [EOS, IDS[0], IDS[1]], TEXT, {"type": "stop", "matched": EOS})
    found = [v for v in check_response(item(), result, CONTEXT) if v.check == "stop_token"]
    assert any("(2 ids after it)" in v.message for v in found)
    assert any(f"EOS/stop id {EOS} at position {len(IDS)} but generation went on for 2 more ids" in v.message for v in found)


def test_eos_mid_answer_is_allowed_under_ignore_eos_only():
    """min_new_tokens only masks stop-id logits in SGLang: a stop id that does appear finishes the
    request (schedule_batch.py `_check_token_based_finish` ignores min_new_tokens)."""
    ids = IDS[:3] + [EOS] + IDS[3:6]
    length = {"type": "length", "length": len(ids)}
    text = TOKENIZER.decode(ids, True)
    assert "stop_token" in fired(check_response(item(max_new_tokens=len(ids)), answer(ids, text, length), CONTEXT))
    assert check_response(item(max_new_tokens=len(ids), ignore_eos=True), answer(ids, text, length), CONTEXT) == []
    assert "stop_token" in fired(check_response(item(max_new_tokens=len(ids), min_new_tokens=4), answer(ids, text, length), CONTEXT))


def test_length_finish_on_a_stop_id_is_a_violation():
    """SGLang checks stop ids before the budget: an EOS as the last budgeted id is a stop finish."""
    ids = IDS[:5] + [EOS]
    text = TOKENIZER.decode(ids, True)
    found = check_response(item(max_new_tokens=len(ids)), answer(ids, text, {"type": "length", "length": len(ids)}), CONTEXT)
    assert fired(found) == {"stop_token"}
    assert "SGLang checks stop ids before the budget" in found[0].message
    assert check_response(item(max_new_tokens=len(ids), ignore_eos=True), answer(ids, text, {"type": "length", "length": len(ids)}), CONTEXT) == []


def test_stop_id_inside_the_last_step_is_allowed_when_a_stop_string_won():
    """A stop string found in the same verify step beats an EOS accepted before it (the string
    check runs first); an EOS in an earlier step is still a violation."""
    stop = TOKENIZER.decode(IDS[4:6], True)
    ids = IDS[:3] + [EOS] + IDS[3:6]
    text = TOKENIZER.decode(ids, True)
    cut = text[: text.index(stop)]
    finish = {"type": "stop", "matched": stop}
    assert check_response(item(stop=[stop]), answer(ids, cut, finish), CONTEXT) == []
    spec_off = IntegrityContext(**{**CONTEXT.__dict__, "num_draft_tokens": None})
    assert "stop_token" in fired(check_response(item(stop=[stop]), answer(ids, cut, finish), spec_off))


def test_max_new_tokens_zero_may_carry_one_output_logprob():
    """max_new_tokens 0: SGLang answers no ids but one output logprob entry (output_streamer.py
    `logprob_end = max(len(output_ids_), 1)`); its id is the prefill sample, not an output id."""
    meta = {"output_token_logprobs": [[-1.25, 517, None]], "output_token_logprobs_length": 1,
            "output_top_logprobs": [[[-1.25, 517, None]]]}
    zero = answer([], "", {"type": "length", "length": 0}, **meta)
    assert check_response(item(max_new_tokens=0), zero, CONTEXT) == []
    none = answer([], "", {"type": "length", "length": 0}, output_top_logprobs=[])
    assert check_response(item(max_new_tokens=0), none, CONTEXT) == []
    two = answer([], "", {"type": "length", "length": 0}, output_token_logprobs=[[-1.0, 5, None]] * 2, output_token_logprobs_length=2)
    assert "logprob_alignment" in fired(check_response(item(max_new_tokens=0), two, CONTEXT))
    miscounted = answer([], "", {"type": "length", "length": 0}, **{**meta, "output_token_logprobs_length": 0})
    assert any("output_token_logprobs_length is 0" in v.message for v in check_response(item(max_new_tokens=0), miscounted, CONTEXT))
    extra = answer(IDS[:2], TOKENIZER.decode(IDS[:2], True), {"type": "length", "length": 2})
    extra["meta_info"]["output_token_logprobs"].append([-1.0, 5, None])
    assert "logprob_alignment" in fired(check_response(item(max_new_tokens=2), extra, CONTEXT))


def test_stop_on_an_id_under_ignore_eos_is_a_violation():
    found = check_response(item(ignore_eos=True, stop_token_ids=[IDS[3]]),
                           answer(IDS[:4], TOKENIZER.decode(IDS[:3], True), {"type": "stop", "matched": IDS[3]}), CONTEXT)
    assert any("ignore_eos disables" in v.message for v in found)


def test_overshoot_past_max_new_tokens():
    found = check_response(item(max_new_tokens=len(IDS) - 3), answer(IDS, TEXT, {"type": "length", "length": len(IDS) - 3}), CONTEXT)
    assert "max_new_tokens" in fired(found)
    assert any(f"{len(IDS)} output ids exceed max_new_tokens {len(IDS) - 3} by 3" in v.message for v in found)


def test_length_finish_must_match_ids_and_budget():
    found = check_response(item(max_new_tokens=len(IDS)), answer(IDS, TEXT, {"type": "length", "length": len(IDS) + 1}), CONTEXT)
    assert fired(found) == {"finish_reason"}
    assert len(found) == 2  # against the ids and against the budget


@pytest.mark.parametrize("finish", [None, {"type": "done"}, {"type": "stop", "matched": [1]}])
def test_malformed_finishes(finish):
    assert "finish_reason" in fired(check_response(item(), answer(IDS, TEXT, finish), CONTEXT))


def test_stop_string_left_in_text():
    found = check_response(item(stop=[" and"]), answer(IDS, TEXT, {"type": "length", "length": len(IDS)}), CONTEXT)
    assert fired(found) == {"stop_string"}
    assert "' and' is in the text at char" in found[0].message
    # no_stop_trim keeps the matched string, it does not disable stop strings
    kept = check_response(item(stop=[" and"], no_stop_trim=True), answer(IDS, TEXT, {"type": "length", "length": len(IDS)}), CONTEXT)
    assert fired(kept) == {"stop_string"}


def test_every_stop_string_left_in_text_is_reported():
    """Two requested stop strings left in a length-finished text: two findings, not a crash (spec off,
    so neither can be excused as sitting inside the last verify step)."""
    spec_off = IntegrityContext(**{**CONTEXT.__dict__, "num_draft_tokens": None})
    found = check_response(item(stop=[" farm", " and"]), answer(IDS, TEXT, {"type": "length", "length": len(IDS)}), spec_off)
    messages = [v.message for v in found if v.check == "stop_string"]
    assert len(messages) == 2 and "' farm'" in messages[0] and "' and'" in messages[1]


def test_stop_string_completed_by_the_last_budgeted_token_is_a_violation():
    """SGLang checks stop strings before the budget: the last budgeted id completing a stop string
    gives a stop finish, so a length finish with the string in the text is wrong."""
    last_word = TOKENIZER.decode(IDS[-2:], True)  # " later." — completed only by the final id
    tie = check_response(item(stop=[last_word], max_new_tokens=len(IDS)), answer(IDS, TEXT, {"type": "length", "length": len(IDS)}), CONTEXT)
    assert fired(tie) == {"stop_string"}
    no_decode = IntegrityContext(**{**CONTEXT.__dict__, "decode": None})
    assert "stop_string" in fired(check_response(item(stop=[last_word]), answer(IDS, TEXT, {"type": "length", "length": len(IDS)}), no_decode))


def test_no_stop_trim_text_ends_exactly_at_the_stop_string():
    """no_stop_trim: the text is cut right after the matched string (detokenizer_manager.py
    `trim_matched_stop`), not after the whole last token or further."""
    cut = TEXT.index(" and") + len(" and")
    ids = encode(TEXT[:cut])
    finish = {"type": "stop", "matched": " and"}
    assert check_response(item(stop=[" and"], no_stop_trim=True), answer(ids, TEXT[:cut], finish), CONTEXT) == []
    found = check_response(item(stop=[" and"], no_stop_trim=True), answer(ids, TEXT[: cut + 3], finish), CONTEXT)
    assert fired(found) == {"stop_string"}
    assert "goes on 3 chars past the matched stop string" in found[0].message


def test_stop_string_sglang_cannot_see_is_not_a_violation():
    """SGLang searches the last stop-length + 1 ids decoded with special tokens: a stop string
    spread over more ids (a non-canonical split) is never seen and generation goes on."""
    word = " rebuilt"
    split = [encode(ch)[0] for ch in word]  # one id per character
    assert len(encode(word)) + 1 < len(split)
    ids = IDS[:3] + split + IDS[3:6]
    text = TOKENIZER.decode(ids, True)
    length = {"type": "length", "length": len(ids)}
    assert "stop_string" not in fired(check_response(item(stop=[word], max_new_tokens=len(ids)), answer(ids, text, length), CONTEXT))
    canonical = IDS[:3] + encode(word) + IDS[3:6]
    assert "stop_string" in fired(check_response(item(stop=[word], max_new_tokens=len(canonical)),
                                                 answer(canonical, TOKENIZER.decode(canonical, True), {"type": "length", "length": len(canonical)}), CONTEXT))


def test_list_order_within_the_last_step_is_not_a_violation():
    """Two stop strings completing in one verify step: SGLang takes the one listed first, even if
    the other sits earlier in the text. Outside the last step, the earlier one must have won."""
    early, late = TOKENIZER.decode(IDS[1:3], True), TOKENIZER.decode(IDS[4:6], True)
    ids = IDS[:6]
    full = TOKENIZER.decode(ids, True)
    text = full[: full.index(late)]
    finish = {"type": "stop", "matched": late}
    assert check_response(item(stop=[late, early]), answer(ids, text, finish), CONTEXT) == []
    assert "stop_string" in fired(check_response(item(stop=[early, late]), answer(ids, text, finish), CONTEXT))
    spec_off = IntegrityContext(**{**CONTEXT.__dict__, "num_draft_tokens": None})
    assert "stop_string" in fired(check_response(item(stop=[late, early]), answer(ids, text, finish), spec_off))


def test_matched_stop_string_must_be_requested():
    found = check_response(item(stop=["zz"]), answer(IDS, TEXT, {"type": "stop", "matched": "later"}), CONTEXT)
    assert any("not a requested stop string" in v.message for v in found)


@pytest.mark.parametrize("change, expected", [
    ({"spec_num_correct_drafts": 21}, "accepted drafts 21 outside [0, drafted 20]"),
    ({"spec_accept_rate": 1.2}, "spec_accept_rate 1.2 outside [0, 1]"),
    ({"spec_accept_rate": 0.9}, "is not accepted/drafted = 10/20"),
    ({"spec_num_proposed_drafts": 24, "spec_accept_rate": 10 / 24}, "drafted 24 != verify steps 4 x (num_draft_tokens 6 - 1)"),
    ({"spec_correct_drafts_histogram": [2, 0, 1, 0, 2, 0]}, "counts 5 steps, spec_verify_ct is 4"),
    ({"spec_correct_drafts_histogram": [1, 1, 0, 0, 1, 1]}, "sums to 10 accepted drafts"),
    ({"spec_num_correct_drafts": None}, "incomplete or not finite"),
])
def test_spec_counts(change, expected):
    meta = {**spec_meta(), **change}
    if "sums to" in expected:
        meta["spec_num_correct_drafts"], meta["spec_accept_rate"] = 9, 9 / 20
    found = check_response(item(), answer(IDS + [EOS], TEXT, {"type": "stop", "matched": EOS}, **meta), CONTEXT)
    assert fired(found) == {"spec_counts"}
    assert any(expected in v.message for v in found), [v.message for v in found]


def test_retokenize_catches_text_without_ids_and_ids_without_text():
    junk = TEXT + " lorem" * 30
    assert fired(check_response(item(), answer(IDS + [EOS], junk, {"type": "stop", "matched": EOS}), CONTEXT)) == {"retokenize"}
    silent = IDS + IDS + [EOS]
    assert fired(check_response(item(), answer(silent, TEXT, {"type": "stop", "matched": EOS}), CONTEXT)) == {"retokenize"}


def test_retokenize_tolerance_and_skipped_specials():
    assert retokenize_slack(0) == 3 and retokenize_slack(200) == 13
    within = IDS[: len(IDS) - 3]  # three ids short of the text: inside the slack of 3 + 1
    assert check_response(item(), answer(within + [EOS], TEXT, {"type": "stop", "matched": EOS}), CONTEXT) == []
    specials = sorted(TOKENIZER.special_ids - {EOS})[:1] * 6  # skipped by skip_special_tokens: no text expected
    assert check_response(item(), answer(IDS + specials + [EOS], TEXT, {"type": "stop", "matched": EOS}), CONTEXT) == []
    assert "retokenize" in fired(check_response(item(skip_special_tokens=False),
                                                answer(IDS + specials + [EOS], TEXT, {"type": "stop", "matched": EOS}), CONTEXT))


def test_shape_problems_stop_the_other_checks():
    assert fired(check_response(item(), {"output_ids": "1 2", "meta_info": {}}, CONTEXT)) == {"response_shape"}
    assert fired(check_response(item(), ["not", "an", "object"], CONTEXT)) == {"response_shape"}
    assert fired(check_generate({"text": ["a", "b"]}, [eos_answer()], CONTEXT)) == {"response_shape"}


# --------------------------------------------------------------------------- payloads and batches
def test_split_payload_handles_batches_n_and_lists():
    assert split_payload({"text": "a", "sampling_params": {"max_new_tokens": 3}}) == [
        {"text": "a", "sampling_params": {"max_new_tokens": 3}, "return_logprob": False}]
    batch = split_payload({"text": ["a", "b"], "sampling_params": [{"stop": ["x"]}, {}], "return_logprob": [True, False]})
    assert [(i["text"], i["sampling_params"], i["return_logprob"]) for i in batch] == [("a", {"stop": ["x"]}, True), ("b", {}, False)]
    assert [i["text"] for i in split_payload({"text": ["a", "b"], "sampling_params": {"n": 2}})] == ["a", "a", "b", "b"]
    assert [i["input_ids"] for i in split_payload({"input_ids": [[1], [2]]})] == [[1], [2]]
    assert is_batch_payload({"text": ["a"]}) and is_batch_payload({"input_ids": [[1]]}) and is_batch_payload({"text": "a", "sampling_params": {"n": 2}})
    assert not is_batch_payload({"text": "a"}) and not is_batch_payload({"input_ids": [1, 2]})


def test_check_generate_checks_every_batch_member():
    bad = eos_answer()
    bad["meta_info"]["completion_tokens"] = 1
    found = check_generate({"text": ["a", "b"], "sampling_params": {}}, [eos_answer(), bad], CONTEXT)
    assert fired(found) == {"completion_tokens"} and len(found) == 1


# --------------------------------------------------------------------------- streams
def cumulative_chunks(full: dict, steps: list[int], index: int | None = None) -> list[dict]:
    """Cumulative chunks of a finished answer, cut after each count of ids in `steps`."""
    chunks = []
    for count in steps:
        final = count == len(full["output_ids"])
        meta = {**full["meta_info"], "completion_tokens": count, "finish_reason": full["meta_info"]["finish_reason"] if final else None,
                "output_token_logprobs": full["meta_info"]["output_token_logprobs"][:count], "output_token_logprobs_length": count}
        text = full["text"] if final else TOKENIZER.decode(full["output_ids"][:count], True)
        chunk = {"text": text, "output_ids": full["output_ids"][:count], "meta_info": meta}
        if index is not None:
            chunk["index"] = index
        chunks.append(chunk)
    return chunks


STEPS = [1, 4, 7, len(IDS), len(IDS) + 1]


def test_a_clean_stream_passes_and_reassembles():
    chunks = cumulative_chunks(eos_answer(), STEPS)
    assert check_stream(item(), chunks, CONTEXT) == []
    assert compare_answers(eos_answer(), stream_finals(item(), chunks)[0]) == []


def test_swapped_chunks_break_the_cumulative_rule():
    chunks = cumulative_chunks(eos_answer(), STEPS)
    chunks[1], chunks[2] = chunks[2], chunks[1]
    found = check_stream(item(), chunks, CONTEXT)
    assert fired(found) == {"stream_cumulative"}
    assert "at stream position 2" in found[0].message


def test_finish_must_come_exactly_once_and_last():
    chunks = cumulative_chunks(eos_answer(), STEPS)
    chunks[0]["meta_info"]["finish_reason"] = {"type": "stop", "matched": EOS}
    assert "2 chunks carry a finish_reason" in check_stream(item(), chunks, CONTEXT)[0].message
    unfinished = cumulative_chunks(eos_answer(), STEPS)[:-1]
    found = check_stream(item(), unfinished, CONTEXT)
    assert "stream_finish" in fired(found) and "finish_reason" in fired(found)


def test_batch_streams_need_valid_indexes_and_every_result():
    payload = {"text": ["a", "b"], "sampling_params": {}}
    first, second = cumulative_chunks(eos_answer(), STEPS, 0), cumulative_chunks(eos_answer(), STEPS, 1)
    interleaved = [c for pair in zip(first, second, strict=False) for c in pair]
    assert check_stream(payload, interleaved, CONTEXT) == []
    assert [f["output_ids"] for f in stream_finals(payload, interleaved)] == [eos_answer()["output_ids"]] * 2
    assert "never appeared" in check_stream(payload, first, CONTEXT)[0].message
    unlabelled = [dict(c) for c in interleaved]
    del unlabelled[3]["index"]
    assert fired(check_stream(payload, unlabelled, CONTEXT)) == {"stream_index"}


def test_incremental_streams_are_concatenated():
    full = eos_answer()
    cumulative = cumulative_chunks(full, STEPS)
    deltas, previous_text, previous_count = [], "", 0
    for chunk in cumulative:
        meta = {**chunk["meta_info"], "output_token_logprobs": chunk["meta_info"]["output_token_logprobs"][previous_count:]}
        deltas.append({"text": chunk["text"][len(previous_text):], "output_ids": chunk["output_ids"][previous_count:], "meta_info": meta})
        previous_text, previous_count = chunk["text"], len(chunk["output_ids"])
    incremental = IntegrityContext(**{**CONTEXT.__dict__, "incremental_streaming": True})
    assert check_stream(item(), deltas, incremental) == []
    assert compare_answers(full, stream_finals(item(), deltas, incremental=True)[0]) == []


# --------------------------------------------------------------------------- comparison and canaries
def test_compare_answers_names_each_difference():
    other = eos_answer()
    other["text"] = TEXT[:-1] + "!"
    other["output_ids"] = other["output_ids"][:-1] + [7]
    other["meta_info"]["finish_reason"] = {"type": "length", "length": len(IDS) + 1}
    differences = compare_answers(eos_answer(), other)
    assert len(differences) == 3
    assert differences[0].startswith(f"text differs at char {len(TEXT) - 1}")
    assert differences[1].startswith(f"output_ids differ at position {len(IDS)}")


def test_canaries_are_distinct_seeded_and_leaks_are_found():
    canaries = make_canaries(64, seed=3)
    assert len(set(canaries)) == 64 and canaries == make_canaries(64, seed=3) and canaries != make_canaries(64, seed=4)
    outputs = [f"own {c}" for c in canaries]
    assert find_canary_leaks(canaries, outputs) == []
    outputs[9] += " and " + canaries[40]
    leaks = find_canary_leaks(canaries, outputs)
    assert [(leak.owner, leak.found_in) for leak in leaks] == [(40, 9)]
    assert leaks[0].describe() == f"canary {canaries[40]} of request 40 appears in the output of request 9"


# --------------------------------------------------------------------------- recorder and tokenizer
def test_recorder_counts_quotes_and_checkpoints():
    recorder = IntegrityRecorder(quotes_per_check=2)
    bad = eos_answer()
    bad["meta_info"]["completion_tokens"] = 0
    recorder.source = "test_a"
    recorder.record(check_response(item(), bad, CONTEXT) * 3, answers=3)
    mark = recorder.checkpoint()
    recorder.source = "test_b"
    threads = [threading.Thread(target=recorder.record, args=(check_response(item(), bad, CONTEXT), 1)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert recorder.total == 11 and recorder.answers_checked == 11 and len(recorder.since(mark)) == 8
    summary = recorder.summary()
    assert summary.startswith("11 integrity violations in 11 checked answers (completion_tokens 11)")
    assert summary.count("\n  - ") == 2 and "[from test_a]" in summary
    totals = recorder.totals()
    assert totals.counts == {"completion_tokens": 11} and totals.by_source == {"test_a": {"completion_tokens": 3}, "test_b": {"completion_tokens": 8}}
    assert len(totals.quotes["completion_tokens"]) == 2 and set(totals.counts) <= set(CHECKS)
    assert list(totals.to_dict()) == ["answers_checked", "streams_checked", "violations", "counts", "by_source", "quotes"]
    assert IntegrityRecorder().summary() == "no integrity violations in 0 checked answers"


def test_local_tokenizer_loads_and_bad_folders_are_one_line_errors(tmp_path):
    assert TOKENIZER.decode(encode(TEXT), True) == TEXT
    assert EOS in TOKENIZER.special_ids and 8096 not in TOKENIZER.special_ids  # <think> is added but not special
    with pytest.raises(SpecsuiteError, match="tokenizer folder not found"):
        load_tokenizer(str(tmp_path / "missing"))
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(SpecsuiteError, match="cannot read .*tokenizer.json"):
        load_tokenizer(str(tmp_path))


def test_native_answer_reads_ids_text_and_finish():
    answer = {"text": "ab", "output_ids": [5, 6], "meta_info": {"finish_reason": {"type": "length", "length": 2}}}
    parsed = NativeAnswer.of(answer)
    assert (parsed.output_ids, parsed.text, parsed.finish_type) == ([5, 6], "ab", "length")
    assert NativeAnswer.of({"text": "", "output_ids": []}).finish_type is None
    with pytest.raises(KeyError):
        NativeAnswer.of({"text": "no ids"})  # an answer without ids is not a native answer
