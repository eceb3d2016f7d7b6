"""Tests for specsuite.families.correctness.detectors: each detector fires on a planted defect and stays silent on clean input."""

from __future__ import annotations

import json

import pytest
from scipy import stats

from specsuite.families.correctness.detectors import (
    DetectorConfig,
    FragmentRule,
    aggregate,
    cp_upper,
    empty_decoding_ids,
    fallback_ids,
    fragment_excess,
    id_fragments,
    invalid_ids,
    nan_finishes,
    padded_row_ids,
    repetition_loop,
    replacement_chars,
    scan_generation,
    stray_chars,
    text_fragments,
)
from specsuite.server.generation import Generation, prompt_hash
from specsuite.server.vocab import VocabInfo

TOKENIZER_LENGTH = 8117
VOCAB_SIZE = 8192

VOCAB = VocabInfo(
    tokenizer_length=TOKENIZER_LENGTH,
    vocab_size=VOCAB_SIZE,
    eos_ids=frozenset({2}),
    special_ids=frozenset({0, 1, 2, 8100, 8101, 8102, 8103}),
    empty_decoding_ids=frozenset({77}),
    token0_text="!",
    fragment_ids={"<think>": 8100, "</think>": 8101, "<tool_call>": 8102, "</tool_call>": 8103},
)


def make_generation(text: str, ids: list[int] | None, logprob_ids: list[int] | None = None, **kw) -> Generation:
    return Generation(
        prompt="p",
        prompt_ids=None,
        prompt_hash=prompt_hash("p", None),
        params={"temperature": 1.0},
        output_ids=ids,
        text=text,
        logprob_ids=list(ids) if logprob_ids is None and ids is not None else logprob_ids,
        completion_tokens=len(ids) if ids is not None else kw.pop("completion_tokens", None),
        **kw,
    )


# -- cp_upper ------------------------------------------------------------------------------


def test_cp_upper_matches_beta_quantile_and_edges():
    assert cp_upper(0, 100) == pytest.approx(1 - 0.05 ** (1 / 100))  # closed form for k = 0
    assert cp_upper(3, 50) == pytest.approx(stats.beta.ppf(0.95, 4, 47))
    assert cp_upper(5, 5) == 1.0
    assert cp_upper(0, 0) == 1.0
    assert cp_upper(1, 1000) < cp_upper(10, 1000) < 1.0


# -- id detectors --------------------------------------------------------------------------


def test_invalid_ids_fire_on_negative_and_out_of_tokenizer():
    ids = [5, -1, TOKENIZER_LENGTH - 1, TOKENIZER_LENGTH, VOCAB_SIZE + 3]
    result = invalid_ids(ids, TOKENIZER_LENGTH)
    assert (result.count, result.total) == (3, 5)
    assert result.positions == [1, 3, 4]
    assert result.examples == [-1, TOKENIZER_LENGTH, VOCAB_SIZE + 3]


def test_invalid_ids_silent_on_valid_range():
    assert invalid_ids([0, 1, TOKENIZER_LENGTH - 1], TOKENIZER_LENGTH).count == 0


def test_padded_row_ids_only_between_tokenizer_length_and_vocab_size():
    ids = [TOKENIZER_LENGTH - 1, TOKENIZER_LENGTH, VOCAB_SIZE - 1, VOCAB_SIZE]
    result = padded_row_ids(ids, TOKENIZER_LENGTH, VOCAB_SIZE)
    assert result.positions == [1, 2]
    assert padded_row_ids([1, 2, 3], TOKENIZER_LENGTH, VOCAB_SIZE).count == 0


def test_fallback_ids_equal_vocab_size_minus_one():
    result = fallback_ids([1, VOCAB_SIZE - 1, 2, VOCAB_SIZE - 1], VOCAB_SIZE, TOKENIZER_LENGTH)
    assert (result.count, result.positions) == (2, [1, 3])
    assert fallback_ids([VOCAB_SIZE - 2, VOCAB_SIZE], VOCAB_SIZE, TOKENIZER_LENGTH).count == 0


def test_empty_decoding_ids():
    assert empty_decoding_ids([77, 5, 77], frozenset({77})).positions == [0, 2]
    assert empty_decoding_ids([5, 6], frozenset({77})).count == 0


# -- stray characters ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["Great! The answer is 4.", "Hello!", "Wow! Really? Yes!\nNext line.", "if a != b: pass", "x!=y", "5! = 120"],
)
def test_stray_silent_on_ordinary_punctuation(text):
    assert stray_chars(text, 10).count == 0


@pytest.mark.parametrize(
    ("text", "expected_positions"),
    [
        ("wo!rd!!", [2, 5, 6]),  # followed by a letter; a run of two
        ("!start", [0]),  # start of text
        ("word !", [5]),  # preceded by whitespace
        ("a\n!b", [2]),  # preceded by a newline and followed by a letter
        ("3!4", [1]),  # followed by a digit
        ("ok!!!", [2, 3, 4]),  # every member of a run
    ],
)
def test_stray_fires(text, expected_positions):
    result = stray_chars(text, 10)
    assert result.positions == expected_positions
    assert result.count == len(expected_positions)


def test_stray_rate_per_1200_tokens_and_configurable_char():
    result = stray_chars("a!b c!d", 600)
    assert result.details["per_1200_tokens"] == pytest.approx(4.0)
    assert result.total == 600
    assert stray_chars("a?b", 10, char="?").count == 1
    assert stray_chars("a?b", 10).count == 0
    assert stray_chars("", 0).details["per_1200_tokens"] is None


# -- fragments -------------------------------------------------------------------------------


def test_fragment_rules_allow_well_formed_structure():
    text = "<think>plan</think>answer <tool_call>{}</tool_call> and <tool_call>{}</tool_call>"
    assert text_fragments(text, 40).count == 0


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("a</think>b</think>c</think>", 2),  # closing think at most once
        ("<think><think>x</think>", 1),
        ("</tool_call><tool_call>x</tool_call>", 1),  # must start with an open
        ("<tool_call><tool_call>x</tool_call></tool_call>", 2),  # must alternate
    ],
)
def test_fragment_excess_in_text(text, count):
    assert text_fragments(text, 40).count == count


def test_fragment_positions_and_examples_point_at_the_excess():
    result = text_fragments("x</think>y</think>", 10)
    assert result.positions == [10]
    assert result.examples == ["</think>"]


def test_fragment_excess_custom_rule():
    rules = (FragmentRule("<end>", max_count=2),)
    assert fragment_excess(["<end>", "<end>"], rules) == (0, [])
    assert fragment_excess(["<end>"] * 3, rules) == (1, [2])


def test_id_fragments_use_single_token_ids():
    ids = [5, 8101, 6, 8101, 8102, 8103, 8103]
    result = id_fragments(ids, VOCAB.fragment_ids)
    assert result.count == 2
    assert result.positions == [3, 6]
    assert id_fragments([8100, 5, 8101], VOCAB.fragment_ids).count == 0
    assert id_fragments([8101, 8101], {}).count == 0  # no fragment ids known: nothing to say


# -- U+FFFD and NaN finish --------------------------------------------------------------------


def test_replacement_chars():
    assert replacement_chars("ab\ufffdc\ufffd", 5).positions == [2, 4]
    assert replacement_chars("plain", 5).count == 0


def test_nan_finish():
    assert nan_finishes({"type": "stop", "matched": "NaN happened"}).count == 1
    assert nan_finishes({"type": "stop", "matched": 2}).count == 0
    assert nan_finishes(None).count == 0


# -- repetition loops -------------------------------------------------------------------------


def varied_ids(n: int, start: int = 100) -> list[int]:
    # Distinct ids: no period anywhere.
    return list(range(start, start + n))


def test_loop_found_at_end_with_smallest_period():
    ids = varied_ids(30) + [7, 8, 9] * 20
    result = repetition_loop(ids)
    assert result.count == 1
    assert result.details["period"] == 3
    assert result.details["start"] == 30
    assert result.details["span"] == 60
    assert result.details["at_end"] is True
    assert result.examples == [[7, 8, 9]]


def test_loop_inside_output_not_at_end():
    ids = varied_ids(10) + [4] * 60 + varied_ids(10, start=500)
    result = repetition_loop(ids)
    assert result.details["period"] == 1
    assert result.details["start"] == 10
    assert result.details["at_end"] is False


def test_loop_silent_on_short_repeats_and_varied_text():
    assert repetition_loop(varied_ids(300)).count == 0
    assert repetition_loop(varied_ids(20) + [5] * 40 + varied_ids(20, 900)).count == 0  # span 40 < 48
    assert repetition_loop(varied_ids(20) + varied_ids(33, 600) * 2).count == 0  # period 33 > 32
    assert repetition_loop(varied_ids(20) + varied_ids(20, 700) * 3).count == 0  # 3 repeats < 4
    assert repetition_loop([]).count == 0


def test_loop_long_period_block():
    block = varied_ids(32, 2000)
    result = repetition_loop(varied_ids(5) + block * 4)
    assert (result.details["period"], result.details["repeats"]) == (32, 4)


# -- scan_generation and aggregate --------------------------------------------------------


def test_scan_generation_clean_record_has_no_hits():
    gen = make_generation("Great! The answer is 4.", [300, 301, 302, 2])
    hits = scan_generation(gen, VOCAB)
    assert not hits.any_hit
    assert set(hits.results) >= {"invalid_id", "padded_row_id", "fallback_id", "stray_char", "repetition_loop"}
    json.dumps(hits.to_dict())  # JSON-friendly


def test_scan_generation_seed_bug_record():
    ids = [300, VOCAB_SIZE - 1, 301, 8101, 8101, 77, 2]
    gen = make_generation("Sure!x !done</think>", ids, finish_reason={"type": "stop", "matched": 2})
    results = scan_generation(gen, VOCAB).results
    assert results["fallback_id"].positions == [1]
    assert results["padded_row_id"].positions == [1]
    assert results["invalid_id"].positions == [1]
    assert results["empty_decoding_id"].positions == [5]
    assert results["fragment_id"].count == 1
    assert results["stray_char"].count == 2
    assert results["token_source_mismatch"].count == 0


def test_scan_generation_reports_token_source_mismatch():
    gen = make_generation("ab", [5, 6, 7], logprob_ids=[5, 9])
    result = scan_generation(gen, VOCAB).results["token_source_mismatch"]
    assert result.positions == [1, 2]
    assert result.total == 3


def test_max_new_tokens_zero_logprob_entry_is_no_token_source_mismatch():
    """SGLang answers max_new_tokens 0 with no ids and one logprob entry (output_streamer.py
    `max(len(output_ids_), 1)`): not a mismatch; two entries, or one beside real ids, still are."""
    assert scan_generation(make_generation("", [], logprob_ids=[517]), VOCAB).results["token_source_mismatch"].count == 0
    assert scan_generation(make_generation("", [], logprob_ids=[517, 5]), VOCAB).results["token_source_mismatch"].count == 2
    assert scan_generation(make_generation("ab", [5], logprob_ids=[5, 9]), VOCAB).results["token_source_mismatch"].count == 1


def test_scan_generation_text_only_record_skips_id_detectors():
    gen = make_generation("a!b", None, completion_tokens=3)
    results = scan_generation(gen, VOCAB).results
    assert "invalid_id" not in results
    assert results["stray_char"].count == 1
    assert results["stray_char"].total == 3


def test_scan_generation_respects_config():
    gen = make_generation("a?b", [300, 301, 2])
    assert scan_generation(gen, VOCAB, DetectorConfig(stray_char="?")).results["stray_char"].count == 1


def test_aggregate_sums_counts_and_bounds():
    clean = scan_generation(make_generation("fine.", [300] * 1 + [301, 2]), VOCAB)
    dirty = scan_generation(make_generation("x!y", [VOCAB_SIZE - 1, 300, 2]), VOCAB)
    totals = aggregate([clean, dirty])
    fallback = totals["fallback_id"]
    assert (fallback.count, fallback.total, fallback.responses_with_hits) == (1, 6, 1)
    assert fallback.upper95 == pytest.approx(cp_upper(1, 6))
    assert totals["stray_char"].per_1200_tokens == pytest.approx(1 * 1200 / 6)
    assert totals["repetition_loop"].count == 0
    # written as the dict of a detector's totals always was: per_1200_tokens for stray_char only
    assert list(fallback.to_dict()) == ["count", "total", "unit", "responses", "responses_with_hits", "rate", "upper95"]
    assert list(totals["stray_char"].to_dict())[-1] == "per_1200_tokens"
