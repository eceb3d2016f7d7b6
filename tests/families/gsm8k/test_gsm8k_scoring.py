"""GSM8K answer extraction and scoring match the anchor (SGLang few_shot_gsm8k) and lm-eval rules.

The recorded responses in tests/data/gsm8k/recorded_responses.json carry hand-derived expected
extractions and outcomes, with a 'why' per case. A literal transcription of the anchor's rule
(re + ast.literal_eval) serves as a second, independent oracle for the SGLang definition.
"""

from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specsuite.families.gsm8k import (
    DEFINITIONS,
    INVALID,
    GSM8KItem,
    extract_lmeval_flexible,
    extract_lmeval_strict,
    extract_sglang_last_integer,
    proportion,
    run_gsm8k,
    score_output,
)
from specsuite.families.gsm8k.data import parse_label
from tests.helpers.native_fake import typed_generate

RECORDED = json.loads((Path(__file__).parents[2] / "data" / "gsm8k" / "recorded_responses.json").read_text("utf-8"))
CASES = RECORDED["cases"]
EXTRACTORS = {
    "sglang": extract_sglang_last_integer,
    "lmeval_strict": extract_lmeval_strict,
    "lmeval_flexible": extract_lmeval_flexible,
}


def anchor_answer_value(text: str) -> int:
    """few_shot_gsm8k's get_answer_value, transcribed from its documented behaviour."""
    numbers = re.findall(r"\d+", text.replace(",", ""))
    if not numbers:
        return INVALID
    try:
        return ast.literal_eval(numbers[-1])
    except SyntaxError:
        return INVALID


def test_sentinel_matches_anchor() -> None:
    assert INVALID == RECORDED["invalid_sentinel"] == -9999999


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
@pytest.mark.parametrize("definition", DEFINITIONS)
def test_extraction_matches_hand_derived_value(case: dict, definition: str) -> None:
    assert EXTRACTORS[definition](case["response"]["text"]) == case["expected"][definition], case["why"]


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_outcomes_match_hand_derived_outcomes(case: dict) -> None:
    scores = score_output(case["response"]["text"], case["gold"])
    assert {d: scores[d].outcome for d in DEFINITIONS} == case["outcome"], case["why"]


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_sglang_extraction_agrees_with_anchor_oracle(case: dict) -> None:
    assert extract_sglang_last_integer(case["response"]["text"]) == anchor_answer_value(case["response"]["text"])
    assert extract_sglang_last_integer(case["gold"]) == anchor_answer_value(case["gold"])


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.text(alphabet=st.sampled_from(list("0123456789-,.$ #\n\u0663\uff13ab")), max_size=40))
def test_sglang_extraction_agrees_with_anchor_oracle_on_arbitrary_text(text: str) -> None:
    assert extract_sglang_last_integer(text) == anchor_answer_value(text)


def test_lmeval_strict_reads_first_hashes_only() -> None:
    assert extract_lmeval_strict("#### 1\n#### 2") == "1"
    assert extract_lmeval_strict("####1") is None


def test_recorded_responses_cover_every_outcome() -> None:
    # The fixture must exercise correct, incorrect and invalid under each definition, or the
    # accuracy comparison below could pass for a scorer that never says one of them.
    for definition in DEFINITIONS:
        seen = {case["outcome"][definition] for case in CASES}
        assert seen == {"correct", "incorrect", "invalid"}, definition


def replay_recorded() -> dict:
    """Run the recorded responses through run_gsm8k, zero-shot so every case is evaluated."""
    items = [GSM8KItem(case["question"], case["gold"], parse_label(case["gold"])) for case in CASES]
    by_question = {case["question"]: case["response"] for case in CASES}

    def generate(payload: dict) -> dict:
        question = payload["text"].rsplit("Question: ", 1)[1].removesuffix("\nAnswer:")
        return by_question[question]

    return run_gsm8k(typed_generate(generate), items, num_shots=0, parallel=4, progress=False).to_dict()


def test_accuracy_and_invalid_equal_anchor_rule_on_recorded_responses() -> None:
    summary = replay_recorded()["definitions"]["sglang"]
    predictions = [anchor_answer_value(case["response"]["text"]) for case in CASES]
    labels = [anchor_answer_value(case["gold"]) for case in CASES]
    anchor_accuracy = sum(pred == label for pred, label in zip(predictions, labels, strict=True)) / len(CASES)
    anchor_invalid = sum(p == INVALID for p in predictions) / len(CASES)
    hand_correct = sum(case["outcome"]["sglang"] == "correct" for case in CASES)
    hand_invalid = sum(case["outcome"]["sglang"] == "invalid" for case in CASES)
    assert summary["accuracy"]["value"] == pytest.approx(anchor_accuracy) == pytest.approx(hand_correct / len(CASES))
    assert summary["invalid"]["value"] == pytest.approx(anchor_invalid) == pytest.approx(hand_invalid / len(CASES))
    assert summary["accuracy"]["n"] == len(CASES)


@pytest.mark.parametrize("definition", ["lmeval_strict", "lmeval_flexible"])
def test_lmeval_accuracy_equals_hand_counts(definition: str) -> None:
    summary = replay_recorded()["definitions"][definition]
    for outcome in ("correct", "incorrect", "invalid"):
        assert summary[f"n_{outcome}"] == sum(case["outcome"][definition] == outcome for case in CASES)
    assert summary["accuracy"]["k"] == summary["n_correct"]
    assert summary["invalid"]["k"] == summary["n_invalid"]


def test_replayed_records_carry_accept_length_from_meta_info() -> None:
    summary = replay_recorded()["accept_length"]
    # 22 cases report spec_accept_length 2.5, one reports only 512 tokens / 128 verify steps = 4.0,
    # and the empty output reports no verify count at all.
    assert summary["n"] == len(CASES) - 1
    assert summary["mean"] == pytest.approx((2.5 * (len(CASES) - 2) + 4.0) / (len(CASES) - 1))
    assert summary["pooled"] == pytest.approx((40 * (len(CASES) - 2) + 512) / (16 * (len(CASES) - 2) + 128))


def test_proportion_intervals() -> None:
    result = proportion(7, 20)
    z = 1.959963984540054
    p, n = 7 / 20, 20
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    assert result["ci_wilson"] == pytest.approx([centre - half, centre + half])
    low, high = result["ci_exact"]
    assert low < result["ci_wilson"][0] and high > result["ci_wilson"][1]  # exact is the wider one here
    assert proportion(0, 0)["value"] is None
    assert proportion(0, 10)["ci_exact"][0] == 0.0
