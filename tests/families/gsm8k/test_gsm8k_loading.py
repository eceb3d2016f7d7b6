"""GSM8K loading from local files and the Hub, prompt format, and the shot/eval split."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from specsuite.errors import SpecsuiteError
from specsuite.families.gsm8k import (
    DEFAULT_MAX_NEW_TOKENS,
    STOP_SEQUENCES,
    GSM8KItem,
    build_prompt,
    build_request,
    load_gsm8k,
    plan_few_shot,
    synthetic_path,
)
from specsuite.server.protocol import native_payload

ROWS = [
    {"question": "Ann has 2 pens and buys 3. How many?", "answer": "2 + 3 = <<2+3=5>>5\n#### 5"},
    {"question": "A car costs 1,200 dollars twice. Total?", "answer": "2 * 1200 = <<2*1200=2400>>2400\n#### 2,400"},
    {"question": "It is 2 degrees and falls 5. Now?", "answer": "2 - 5 = <<2-5=-3>>-3\n#### -3"},
]
EXPECTED = [GSM8KItem(row["question"], row["answer"], label) for row, label in zip(ROWS, [5, 2400, -3], strict=True)]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def assert_one_line(err: pytest.ExceptionInfo, *fragments: str) -> None:
    message = str(err.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message


def test_loads_jsonl(tmp_path: Path) -> None:
    assert load_gsm8k(str(write_jsonl(tmp_path / "gsm8k.jsonl", ROWS))) == EXPECTED


def test_loads_parquet(tmp_path: Path) -> None:
    path = tmp_path / "gsm8k.parquet"
    pq.write_table(pa.Table.from_pylist(ROWS), path)
    assert load_gsm8k(str(path)) == EXPECTED


def test_missing_file_is_one_clear_line(tmp_path: Path) -> None:
    with pytest.raises(SpecsuiteError) as err:
        load_gsm8k(str(tmp_path / "absent.jsonl"))
    assert_one_line(err, "not found", "absent.jsonl")


def test_unknown_suffix_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "gsm8k.csv"
    path.write_text("question,answer\n", encoding="utf-8")
    with pytest.raises(SpecsuiteError) as err:
        load_gsm8k(str(path))
    assert_one_line(err, ".csv", ".jsonl", ".parquet")


def test_wrong_columns_are_named(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "gsm8k.jsonl", [{"question": "q?", "solution": "#### 1"}])
    with pytest.raises(SpecsuiteError) as err:
        load_gsm8k(str(path))
    assert_one_line(err, "lacks column(s) answer", "solution")


@pytest.mark.parametrize(
    ("answer", "fragment"),
    [("The answer is 5.", "no '#### N' line"), ("#### five", "'#### five' is not an integer")],
)
def test_bad_answer_row_is_named(tmp_path: Path, answer: str, fragment: str) -> None:
    path = write_jsonl(tmp_path / "gsm8k.jsonl", [ROWS[0], {"question": "q?", "answer": answer}])
    with pytest.raises(SpecsuiteError) as err:
        load_gsm8k(str(path))
    assert_one_line(err, "row 1", fragment)


def test_malformed_json_is_one_clear_line(tmp_path: Path) -> None:
    path = tmp_path / "gsm8k.jsonl"
    path.write_text('{"question": "q?", "answer": "#### 1"}\n{"question": \n', encoding="utf-8")
    with pytest.raises(SpecsuiteError) as err:
        load_gsm8k(str(path))
    assert_one_line(err, "cannot read GSM8K file", str(path))


@pytest.mark.parametrize("source", [None, "hf"])
def test_hub_failure_points_to_local_options(monkeypatch: pytest.MonkeyPatch, source: str | None) -> None:
    calls = []

    def offline(*args, **kwargs):
        calls.append((args, kwargs))
        raise ConnectionError("Couldn't reach 'openai/gsm8k' on the Hub (LocalEntryNotFoundError)\nmore detail")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(SpecsuiteError) as err:
        load_gsm8k(source, split="test")
    assert calls == [(("openai/gsm8k", "main"), {"split": "test"})]
    assert_one_line(err, "openai/gsm8k", "Couldn't reach", "--gsm8k-path", "synthetic")


def test_bundled_synthetic_set() -> None:
    if not synthetic_path().is_file():
        pytest.skip(f"{synthetic_path()} not written yet")
    items = load_gsm8k("synthetic")
    assert len(items) == 330  # the size agreed for specsuite/fixtures/data/gsm8k_synth.jsonl
    assert all(item.question and item.answer for item in items)
    plan = plan_few_shot(len(items), 5, None, seed=0)
    assert len(plan.eval_indices) == 325


def test_prompt_format_and_payload() -> None:
    shots = EXPECTED[:2]
    prompt = build_prompt(shots, "What is 1 + 1?")
    assert prompt == (
        f"Question: {ROWS[0]['question']}\nAnswer: {ROWS[0]['answer']}\n\n"
        f"Question: {ROWS[1]['question']}\nAnswer: {ROWS[1]['answer']}\n\n"
        "Question: What is 1 + 1?\nAnswer:"
    )
    payload = native_payload(build_request(prompt))  # on the wire to SGLang
    assert payload == {
        "text": prompt,
        "sampling_params": {
            "temperature": 0.0,
            "top_p": 1.0,
            "top_k": -1,  # every field a server could default is sent at its neutral value (sampling_pins)
            "min_p": 0.0,
            "max_new_tokens": 512,
            "stop": ["Question", "Assistant:", "<|separator|>"],
            "frequency_penalty": 0.0,
            "presence_penalty": 0.0,
            "repetition_penalty": 1.0,
        },
        "return_logprob": True,
    }
    assert DEFAULT_MAX_NEW_TOKENS == 512 and list(STOP_SEQUENCES) == payload["sampling_params"]["stop"]
    assert build_request(prompt, temperature=0.7).sampling.temperature == 0.7


def numbered_items(n: int) -> list[GSM8KItem]:
    return [GSM8KItem(f"What is {i} + {i}?", f"{i} + {i} = {2 * i}\n#### {2 * i}", 2 * i) for i in range(n)]


@pytest.mark.parametrize("seed", range(5))
def test_shots_are_excluded_from_evaluation_by_default(seed: int) -> None:
    items = numbered_items(30)
    plan = plan_few_shot(len(items), 5, None, seed=seed)
    assert len(plan.shot_indices) == 5 and not set(plan.shot_indices) & set(plan.eval_indices)
    assert sorted(plan.shot_indices + plan.eval_indices) == list(range(30))
    shots = [items[i] for i in plan.shot_indices]
    for index in plan.eval_indices:
        prompt = build_prompt(shots, items[index].question)
        assert prompt.count(items[index].question) == 1  # only as the question being asked


def test_shot_choice_is_seeded() -> None:
    assert plan_few_shot(100, 5, 10, seed=3) == plan_few_shot(100, 5, 10, seed=3)
    assert plan_few_shot(100, 5, 10, seed=3).shot_indices != plan_few_shot(100, 5, 10, seed=4).shot_indices


def test_anchor_option_reproduces_shot_leakage() -> None:
    items = numbered_items(30)
    plan = plan_few_shot(len(items), 5, 10, shots_from_eval=True)
    assert plan.shot_indices == (0, 1, 2, 3, 4)
    assert plan.eval_indices == tuple(range(10))
    shots = [items[i] for i in plan.shot_indices]
    assert build_prompt(shots, items[0].question).count(items[0].question) == 2  # asked with its own answer shown


@pytest.mark.parametrize(
    ("n_items", "num_shots", "num_questions", "fragment"),
    [(10, 11, None, "num_shots=11 exceeds"), (10, 5, 6, "num_questions=6 is outside 1..5"), (10, -1, None, ">= 0")],
)
def test_impossible_plans_are_rejected(n_items: int, num_shots: int, num_questions: int | None, fragment: str) -> None:
    with pytest.raises(SpecsuiteError) as err:
        plan_few_shot(n_items, num_shots, num_questions)
    assert_one_line(err, fragment)
