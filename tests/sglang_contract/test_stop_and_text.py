"""Contract: how SGLang 0.5.23 builds `text`, searches stop strings and orders finishes, each fact
read from its source, and the harness's checks and the reference server following it.

The reference server's finish rules are driven here without its models or scheduler thread: an
engine shell gets one step's accepted ids and applies `Engine._commit` to them, as a verify step
does.
"""

from __future__ import annotations

import ast
import re

import numpy as np
import pytest
from tokenizers import Tokenizer

from specsuite.refserver.engine import Engine, EngineConfig, EngineCounters
from specsuite.refserver.engine_request import EngineRequest, LogprobConfig, SamplingConfig
from specsuite.refserver.model_loading import MODEL_DIR, ReferenceModel
from specsuite.refserver.responses import TEXT_CONTEXT_IDS, output_text
from specsuite.server.generated_text import SGLANG_TEXT_CONTEXT_IDS, decode_in_context, prefix_texts_in_context
from specsuite.server.integrity_rules import IntegrityContext
from specsuite.server.kinds.sglang.integrity_rules import check_response
from specsuite.server.protocol import NativeCallsThroughPayloads
from tests.helpers.sentencepiece_style import sentencepiece_style_tokenizer

SCHEDULE_BATCH = "srt/managers/schedule_batch.py"
DETOKENIZER = "srt/managers/detokenizer_manager.py"
BYTE_LEVEL = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
EOS_TEXT = "<|endoftext|>"
PROMPT = "Question: how old is the farm?\nAnswer:"


def function_source(text: str, name: str) -> str:
    """The source of the first function called `name` in a module's text."""
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return ast.get_source_segment(text, node) or ""
    raise AssertionError(f"SGLang 0.5.23 has no function {name} here any more: re-read the contract")


def reference_model(tokenizer: Tokenizer) -> ReferenceModel:
    """A ReferenceModel around `tokenizer` without trained models: enough for text and stop rules."""
    length = tokenizer.get_vocab_size(with_added_tokens=True)
    eos = tokenizer.token_to_id(EOS_TEXT) if tokenizer.token_to_id(EOS_TEXT) is not None else tokenizer.token_to_id("</s>")
    return ReferenceModel(model_dir=MODEL_DIR, tokenizer=tokenizer, config={}, tokenizer_length=length, vocab_size=length,
                          context_length=4096, eos_ids=(eos,), special_ids=frozenset(tokenizer.get_added_tokens_decoder()),
                          target=None, draft=None)


def finish_rules(model: ReferenceModel) -> Engine:
    """An Engine shell with the finish rules only (no models, no thread)."""
    engine = Engine.__new__(Engine)
    engine.config = EngineConfig(eos_ids=model.eos_ids)
    engine.decode_text = model.decode_text
    engine.tokenizer_length = model.tokenizer_length
    engine.counters = EngineCounters()
    engine._step_requests = {}  # as inside a decode step: finishes are collected, not published
    return engine


def new_request(model: ReferenceModel, **sampling) -> EngineRequest:
    config = SamplingConfig(temperature=0.0, **sampling)
    config.stop_str_max_len = model.stop_str_max_len(config.stop)  # what the server sets
    prompt = np.asarray(model.tokenizer.encode(PROMPT).ids, dtype=np.int64)
    return EngineRequest("rid", prompt, config, LogprobConfig(), 0, np.random.default_rng(0))


def run_steps(model: ReferenceModel, request: EngineRequest, steps: list[list[int]]) -> EngineRequest:
    """Commit each step's accepted ids in turn, then publish what a client would see."""
    engine = finish_rules(model)
    for tokens in steps:
        engine._commit(request, tokens, np.zeros((len(tokens), model.vocab_size)))
    request.publish(request.mark())
    return request


def ids_of(model: ReferenceModel, text: str) -> list[int]:
    return model.tokenizer.encode(text, add_special_tokens=False).ids


def harness_context(model: ReferenceModel, num_draft_tokens: int | None = 6) -> IntegrityContext:
    tokenizer = model.tokenizer
    return IntegrityContext(eos_ids=frozenset(model.eos_ids), skipped_ids=model.special_ids,
                            encode=lambda text: tokenizer.encode(text, add_special_tokens=False).ids,
                            decode=lambda ids, skip: tokenizer.decode(ids, skip_special_tokens=skip), num_draft_tokens=num_draft_tokens)


def answer_of(request: EngineRequest, model: ReferenceModel) -> dict:
    return {"text": output_text(model, request), "output_ids": list(request.output_ids),
            "meta_info": {"id": "rid", "finish_reason": request.finish_reason, "completion_tokens": len(request.output_ids)}}


def item_of(request: EngineRequest) -> dict:
    s = request.sampling
    params = {"temperature": 0, "max_new_tokens": s.max_new_tokens, "stop": s.stop, "no_stop_trim": s.no_stop_trim,
              "min_new_tokens": s.min_new_tokens, "skip_special_tokens": s.skip_special_tokens}
    return {"text": PROMPT, "sampling_params": params, "return_logprob": False}


# --------------------------------------------------------------------------- text in context
def test_text_is_decoded_after_five_prompt_ids(sglang_source) -> None:
    """schedule_batch.py:163 `INIT_INCREMENTAL_DETOKENIZATION_OFFSET = 5`; `init_incremental_detokenize`
    (schedule_batch.py:1788-1806) starts the decode ids that many prompt ids early, and
    detokenizer_manager.py:393 keeps `read_texts[i][len(surr_texts[i]) :]`: the text those prompt
    ids add nothing to. The harness and the reference server use the same count."""
    source = sglang_source(SCHEDULE_BATCH)
    offset = re.search(r"^INIT_INCREMENTAL_DETOKENIZATION_OFFSET = (\d+)$", source, re.M)
    assert offset and int(offset.group(1)) == SGLANG_TEXT_CONTEXT_IDS == TEXT_CONTEXT_IDS
    init = function_source(source, "init_incremental_detokenize")
    assert "origin_input_ids_unpadded[self.surr_offset :]" in init and "INIT_INCREMENTAL_DETOKENIZATION_OFFSET" in init
    assert "new_text = read_texts[i][len(surr_texts[i]) :]" in sglang_source(DETOKENIZER)


@pytest.mark.parametrize("tokenizer_kind", ["sentencepiece-style", "byte-level"])
def test_generated_text_keeps_the_space_a_plain_decode_drops(tokenizer_kind) -> None:
    """SentencePiece-style (Metaspace) decoding drops a sequence's first leading space, so
    `/detokenize(output_ids)` is not SGLang's text; decoded after the prompt's last ids it is. The
    harness's reference texts and the reference server's `text` are both built that way; with the
    byte-level tokenizer the two ways agree (detokenizer_manager.py:393)."""
    tokenizer = sentencepiece_style_tokenizer() if tokenizer_kind == "sentencepiece-style" else BYTE_LEVEL
    model = reference_model(tokenizer)
    prompt = tokenizer.encode("The farm was built").ids
    output = tokenizer.encode(" in 1111 and rebuilt", add_special_tokens=False).ids
    in_context = decode_in_context(tokenizer.decode, prompt[-SGLANG_TEXT_CONTEXT_IDS:], output)
    assert in_context == " in 1111 and rebuilt"
    if tokenizer_kind == "sentencepiece-style":
        assert tokenizer.decode(output) == "in 1111 and rebuilt"  # what /detokenize answers
    else:
        assert tokenizer.decode(output) == in_context
    texts = prefix_texts_in_context(tokenizer.decode, prompt, output)
    assert texts[0] == "" and texts[-1] == in_context and texts[1] == " in"
    request = EngineRequest("rid", np.asarray(prompt, dtype=np.int64), SamplingConfig(), LogprobConfig(), 0, np.random.default_rng(0))
    request.output_ids = list(output)
    request.finish_reason = {"type": "length", "length": len(output)}
    assert output_text(model, request) == in_context


# --------------------------------------------------------------------------- stop strings
def test_stop_strings_are_checked_in_list_order(sglang_source) -> None:
    """`_check_str_based_finish` (schedule_batch.py:1911-1928) loops over `stop_strs` in list order
    over the step's tail and returns on the first found: two stop strings completing in one
    verify step end on the one listed first, even if the other sits earlier in the text. Over two
    steps the earlier one wins in the earlier step. The reference server does the same, and the
    harness takes the one-step case as SGLang's rule (with speculation), not as a violation."""
    check = function_source(sglang_source(SCHEDULE_BATCH), "_check_str_based_finish")
    loop = check[check.index("for stop_str in self.sampling_params.stop_strs:"):]
    assert loop.index("return True") < loop.index("for stop_regex_str")
    model = reference_model(BYTE_LEVEL)
    first, second = ids_of(model, " The farm"), ids_of(model, " was built in 1111")
    stops = [" built", " farm"]  # " farm" completes first in the text
    one_step = run_steps(model, new_request(model, max_new_tokens=64, stop=stops), [first + second])
    assert one_step.finish_reason == {"type": "stop", "matched": " built"}
    assert one_step.output_ids == first + ids_of(model, " was built")
    assert output_text(model, one_step) == " The farm was"
    assert check_response(item_of(one_step), answer_of(one_step, model), harness_context(model)) == []
    assert "stop_string" in {v.check for v in check_response(item_of(one_step), answer_of(one_step, model), harness_context(model, None))}
    two_steps = run_steps(model, new_request(model, max_new_tokens=64, stop=stops), [first, second])
    assert two_steps.finish_reason == {"type": "stop", "matched": " farm"}
    assert output_text(model, two_steps) == " The"


def test_stop_strings_are_searched_in_a_tail_decoded_with_special_tokens(sglang_source) -> None:
    """`tail_str` (schedule_batch.py:1819-1828) decodes the last stop_str_max_len + 1 (+ new - 1)
    ids with a bare `tokenizer.decode`, which keeps special tokens; stop_str_max_len is the longest
    stop's id count without special tokens (sampling_params.py:346-352). So a stop string that is a
    special token ends the request although `text` (skip_special_tokens) never shows it."""
    source = sglang_source(SCHEDULE_BATCH)
    assert "return self.tokenizer.decode(self.output_ids[-tail_len:])" in function_source(source, "tail_str")
    tail_len = function_source(source, "_stop_match_tail_len")
    assert "stop_str_max_len + 1" in tail_len and "max(new_accepted_len - 1, 0)" in tail_len
    assert "tokenizer.encode(stop_str, add_special_tokens=False)" in sglang_source("srt/sampling/sampling_params.py")
    model = reference_model(BYTE_LEVEL)
    user = BYTE_LEVEL.token_to_id("<|user|>")
    request = run_steps(model, new_request(model, max_new_tokens=64, stop=["<|user|>"]), [ids_of(model, " The farm") + [user] + ids_of(model, " was")])
    assert request.finish_reason == {"type": "stop", "matched": "<|user|>"}
    assert request.output_ids[-1] == user and output_text(model, request) == " The farm"
    assert check_response(item_of(request), answer_of(request, model), harness_context(model)) == []


def test_a_stop_string_over_more_ids_than_the_tail_is_not_seen(sglang_source) -> None:
    """The tail holds stop_str_max_len + 1 ids for a one-id step (schedule_batch.py:1808-1817): a
    stop string spelled one character per id is missed, and generation goes on. The reference
    server misses it too, and the harness does not call the string left in the text a violation."""
    assert "stop_str_max_len + 1" in function_source(sglang_source(SCHEDULE_BATCH), "_stop_match_tail_len")
    model = reference_model(BYTE_LEVEL)
    spelled = [ids_of(model, ch)[0] for ch in " rebuilt"]
    assert len(ids_of(model, " rebuilt")) + 1 < len(spelled)
    steps = [[i] for i in ids_of(model, " The farm") + spelled + ids_of(model, " was")]
    request = run_steps(model, new_request(model, max_new_tokens=len(steps), stop=[" rebuilt"]), steps)
    assert request.finish_reason == {"type": "length", "length": len(steps)}
    assert " rebuilt" in output_text(model, request)
    found = check_response(item_of(request), answer_of(request, model), harness_context(model, None))
    assert "stop_string" not in {v.check for v in found}


# --------------------------------------------------------------------------- finish order
def test_finish_order_is_stop_string_then_stop_id_then_budget(sglang_source) -> None:
    """`update_finish_state` (schedule_batch.py:2007-2048) tries stop strings, then stop ids, then
    the length budget, and a stop found past the budget becomes a length finish at the budget
    (`_cap_finished_len_at_max_new_tokens`, :1995-2005). The reference server follows that order;
    the harness fails a length finish that leaves a stop string or EOS it should have stopped on."""
    update = function_source(sglang_source(SCHEDULE_BATCH), "update_finish_state")
    order = [update.index(call) for call in ("self._check_str_based_finish(", "self._check_token_based_finish(",
                                             "len(self.output_ids) >= self.sampling_params.max_new_tokens")]
    assert order == sorted(order)
    model = reference_model(BYTE_LEVEL)
    eos = model.eos_ids[0]
    words = ids_of(model, " The farm was built")
    context = harness_context(model)

    tie = run_steps(model, new_request(model, max_new_tokens=len(words), stop=[" built"]), [words])
    assert tie.finish_reason == {"type": "stop", "matched": " built"}
    eos_at_budget = run_steps(model, new_request(model, max_new_tokens=3), [words[:2] + [eos]])
    assert eos_at_budget.finish_reason == {"type": "stop", "matched": eos}
    string_beats_eos = run_steps(model, new_request(model, max_new_tokens=64, stop=[" built"]), [words[:2] + [eos] + words[2:]])
    assert string_beats_eos.finish_reason == {"type": "stop", "matched": " built"} and eos in string_beats_eos.output_ids
    assert check_response(item_of(string_beats_eos), answer_of(string_beats_eos, model), context) == []
    past_budget = run_steps(model, new_request(model, max_new_tokens=2, stop=[" built"]), [words])
    assert past_budget.finish_reason == {"type": "length", "length": 2} and past_budget.output_ids == words[:2]

    # What a budget-first order would answer: a length finish with the stop string or EOS kept.
    budget_first = {"type": "length", "length": len(words)}
    wrong = {"text": output_text(model, tie) + " built", "output_ids": words, "meta_info": {"finish_reason": budget_first}}
    assert "stop_string" in {v.check for v in check_response(item_of(tie), wrong, context)}
    wrong_eos = {"text": " The farm", "output_ids": words[:2] + [eos], "meta_info": {"finish_reason": {"type": "length", "length": 3}}}
    assert "stop_token" in {v.check for v in check_response(item_of(eos_at_budget), wrong_eos, context)}


def test_no_stop_trim_cuts_right_after_the_stop_string(sglang_source) -> None:
    """`trim_matched_stop` (detokenizer_manager.py:194-212) cuts the text at the matched string's
    first occurrence, `output[:end] if no_stop_trim else output[:pos]`: with no_stop_trim the text
    ends exactly where the stop string ends, not where its last token does."""
    trim = function_source(sglang_source(DETOKENIZER), "trim_matched_stop")
    assert "pos = output.find(matched)" in trim and "return output[:end] if no_stop_trim else output[:pos]" in trim
    model = reference_model(BYTE_LEVEL)
    words = ids_of(model, " The farm was built in")
    assert model.decode_text(words[-2:-1]) == " built"  # " buil" ends inside that token
    kept = run_steps(model, new_request(model, max_new_tokens=64, stop=[" buil"], no_stop_trim=True), [words])
    assert output_text(model, kept) == " The farm was buil"
    assert check_response(item_of(kept), answer_of(kept, model), harness_context(model)) == []
    too_long = {**answer_of(kept, model), "text": " The farm was built"}
    assert "stop_string" in {v.check for v in check_response(item_of(kept), too_long, harness_context(model))}


def test_min_new_tokens_masks_stop_ids_but_not_stop_strings(sglang_source) -> None:
    """min_new_tokens is a logit penalty on EOS/stop ids while fewer ids were produced
    (sampling/penaltylib/min_new_tokens.py:89-90); neither finish check reads it
    (schedule_batch.py:1856-1878 and :1911-1928), so a stop string ends the request early."""
    penalty = sglang_source("srt/sampling/penaltylib/min_new_tokens.py")
    assert "mask = self.len_output_tokens < self.min_new_tokens" in penalty and "stop_token_penalties" in penalty
    source = sglang_source(SCHEDULE_BATCH)
    for check in ("_check_token_based_finish", "_check_str_based_finish", "update_finish_state"):
        assert "min_new_tokens" not in function_source(source, check)
    model = reference_model(BYTE_LEVEL)
    words = ids_of(model, " The farm was built")
    early = run_steps(model, new_request(model, max_new_tokens=64, min_new_tokens=10, stop=[" farm"]), [[i] for i in words])
    assert early.finish_reason == {"type": "stop", "matched": " farm"} and len(early.output_ids) < 10
    engine = finish_rules(model)
    waiting = new_request(model, max_new_tokens=64, min_new_tokens=2, stop_token_ids=[words[0]])
    probs = np.full((1, model.vocab_size), 1.0 / model.vocab_size)
    masked = engine._mask_stop_ids([waiting], probs)
    assert masked[0, model.eos_ids[0]] == 0 and masked[0, words[0]] == 0 and masked[0, words[1]] > 0
    waiting.computed.output_ids.extend(words[:2])
    assert engine._mask_stop_ids([waiting], probs) is probs  # min_new_tokens reached: nothing masked


class _SentencePieceServer(NativeCallsThroughPayloads):
    """Just enough of a client for the integrity probe's reference: its native call (through /generate) answers the
    given ids with SGLang's in-context text, /tokenize and /detokenize use the SentencePiece-style tokenizer."""

    def __init__(self, tokenizer: Tokenizer, output: list[int]) -> None:
        self.tokenizer, self.output = tokenizer, output

    def tokenize(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=add_special_tokens).ids

    def detokenize(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)

    def generate(self, payload: dict) -> dict:
        prompt = self.tokenize(payload["text"])
        text = decode_in_context(self.tokenizer.decode, prompt[-SGLANG_TEXT_CONTEXT_IDS:], self.output)
        return {"text": text, "output_ids": list(self.output), "meta_info": {"finish_reason": {"type": "length", "length": len(self.output)}}}


def test_integrity_reference_texts_are_decoded_in_context() -> None:
    """The integrity suite cuts expected texts from the reference's prefix texts: they must be
    SGLang's in-context texts (detokenizer_manager.py:393), or every stop-id and max_new_tokens
    case fails against a correct server with a SentencePiece-style tokenizer."""
    from specsuite.pytest_plugin.integrity import IntegrityProbe

    tokenizer = sentencepiece_style_tokenizer()
    output = tokenizer.encode(" in 1111 and rebuilt", add_special_tokens=False).ids
    server = _SentencePieceServer(tokenizer, output)
    probe = IntegrityProbe(specsuite=None, client=server, recorder=None)
    reference = probe.reference("The farm was built")
    assert reference.prefix_texts[len(output)] == reference.text == " in 1111 and rebuilt"
    assert reference.prefix_texts[1] == " in" and reference.tokens_to_contain(" and") == 5
