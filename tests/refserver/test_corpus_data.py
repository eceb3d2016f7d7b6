"""The reference corpus and the synthetic GSM8K set: deterministic, well formed, and
consistent with the committed jsonl."""

from __future__ import annotations

import json
import re
from fractions import Fraction

import pytest

from specsuite.fixtures.data import gsm8k_synth
from specsuite.fixtures.data.gsm8k_synth import COMMITTED_PATH, generate_problems
from specsuite.refserver.corpus import EOS, build_documents, corpus_text

# The few-shot scorer's extraction: drop commas, take the last unsigned integer.
_INTEGER = re.compile(r"\d+")
# "a op b [op c] = r" inside a reasoning line; $ and thousands separators allowed.
_EQUATION = re.compile(r"(\$?[\d,]*\d(?: ?[-+*/] ?\$?[\d,]*\d)+) = (-?\$?[\d,]*\d)")


def _evaluate(expression: str) -> Fraction:
    """Value of an integer expression with + - * / and the usual precedence."""
    tokens = re.findall(r"\d+|[-+*/]", expression.replace(",", "").replace("$", ""))
    terms: list[Fraction] = [Fraction(tokens[0])]
    signs: list[str] = ["+"]
    for operator, operand in zip(tokens[1::2], tokens[2::2], strict=False):
        if operator == "*":
            terms[-1] *= int(operand)
        elif operator == "/":
            terms[-1] /= int(operand)
        else:
            terms.append(Fraction(operand))
            signs.append(operator)
    return sum((t if sign == "+" else -t for t, sign in zip(terms, signs, strict=False)), Fraction(0))


@pytest.fixture(scope="module")
def documents() -> list[str]:
    return build_documents(0)


@pytest.fixture(scope="module")
def committed_rows() -> list[dict]:
    return [json.loads(line) for line in COMMITTED_PATH.read_text(encoding="utf-8").splitlines()]


def _is_qa(document: str) -> bool:
    return document.startswith("Question: ")


def _is_chat(document: str) -> bool:
    return document.startswith("<|")


# -- corpus ---------------------------------------------------------------------------------


def test_corpus_is_deterministic_and_seed_dependent() -> None:
    assert corpus_text(0) == corpus_text(0)
    assert corpus_text(1) != corpus_text(0)


def test_corpus_size_is_in_range() -> None:
    assert 1_200_000 <= len(corpus_text(0)) <= 1_800_000


def test_documents_are_joined_by_the_eos_string(documents) -> None:
    assert corpus_text(0, eos="<SEP>") == "<SEP>".join(documents)
    assert not any(EOS in document for document in documents)


def test_corpus_has_all_three_kinds(documents) -> None:
    kinds = [_is_qa(d) for d in documents], [_is_chat(d) for d in documents]
    assert sum(kinds[0]) > 100 and sum(kinds[1]) > 300
    assert sum(1 for d in documents if not _is_qa(d) and not _is_chat(d)) > 300


def test_every_committed_item_appears_in_few_shot_format(committed_rows) -> None:
    text = corpus_text(0)
    for row in committed_rows:
        assert f"Question: {row['question']}\nAnswer: {row['answer']}" in text


def test_qa_documents_hold_several_pairs_split_by_blank_lines(documents) -> None:
    for document in filter(_is_qa, documents):
        pairs = document.split("\n\n")
        assert len(pairs) >= 3
        for pair in pairs:
            assert re.fullmatch(r"Question: [^\n]+\nAnswer: .+\n#### \d+", pair, flags=re.S), pair


def test_chat_think_blocks_close_exactly_once(documents) -> None:
    for document in filter(_is_chat, documents):
        for turn in document.split("<|assistant|>\n")[1:]:
            assert turn.count("<think>") == turn.count("</think>") <= 1
            if "<think>" in turn:
                assert turn.startswith("<think>\n") and "\n</think>\n" in turn


def test_tool_calls_are_balanced_json_followed_by_a_tool_turn(documents) -> None:
    calls = 0
    for document in filter(_is_chat, documents):
        assert document.count("<tool_call>") == document.count("</tool_call>")
        for match in re.finditer(r"<tool_call>\n(.*?)\n</tool_call>\n(<\|tool\|>\n)?", document):
            call = json.loads(match.group(1))
            assert isinstance(call["name"], str) and isinstance(call["arguments"], dict)
            assert match.group(2), "tool call not followed by a <|tool|> turn"
            calls += 1
    assert calls > 100


def test_prose_is_varied_and_punctuated(documents) -> None:
    prose = "\n".join(d for d in documents if not _is_qa(d) and not _is_chat(d))
    words = set(re.findall(r"[a-z]+", prose))
    assert len(words) > 2000
    for mark in ("?", "!", '"', ";"):
        assert prose.count(mark) > 50, mark


# -- synthetic GSM8K set --------------------------------------------------------------------


def test_committed_jsonl_rows_have_gsm8k_keys_and_matching_answers(committed_rows) -> None:
    regenerated = generate_problems(len(committed_rows), gsm8k_synth.COMMITTED_SEED)
    assert len(committed_rows) >= 300
    for row, problem in zip(committed_rows, regenerated, strict=False):
        assert list(row) == ["question", "answer"]
        assert row["answer"].endswith(f"\n#### {problem['final_answer']}")


def test_committed_jsonl_equals_regeneration() -> None:
    assert COMMITTED_PATH.read_text(encoding="utf-8") == gsm8k_synth.committed_jsonl()


def test_generation_is_deterministic_and_prefix_stable() -> None:
    longer = generate_problems(60, 5)
    assert generate_problems(60, 5) == longer
    assert generate_problems(25, 5) == longer[:25]
    assert generate_problems(60, 6) != longer
    assert len({p["question"] for p in generate_problems(2000, 5)}) == 2000


def test_final_answers_are_what_the_few_shot_scorer_extracts() -> None:
    for problem in generate_problems(2000, 9):
        final = problem["final_answer"]
        assert isinstance(final, int) and final >= 0
        assert problem["answer"].splitlines()[-1] == f"#### {final}"
        assert int(_INTEGER.findall(problem["answer"].replace(",", ""))[-1]) == final
        assert "<<" not in problem["answer"]


def test_every_reasoning_equation_is_correct() -> None:
    checked = 0
    for problem in generate_problems(2000, 11):
        for line in problem["answer"].splitlines()[:-1]:
            for left, right in _EQUATION.findall(line):
                assert _evaluate(left) == int(right.replace(",", "").replace("$", "")), line
                checked += 1
    assert checked > 4000


def test_number_formats_and_negative_differences_both_occur() -> None:
    answers = [p["answer"] for p in generate_problems(2000, 13)]
    assert sum(bool(re.search(r"\d,\d{3}", a)) for a in answers) > 50
    assert sum(bool(re.search(r"(?<![\d,])\d{4,}(?![\d,])", a.rsplit("\n", 1)[0])) for a in answers) > 50
    assert sum("= -" in a for a in answers) > 10
    assert sum(len(a.splitlines()) >= 4 for a in answers) > 200  # 3+ reasoning steps


def test_negative_count_is_rejected() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        generate_problems(-1, 0)
