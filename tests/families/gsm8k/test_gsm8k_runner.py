"""run_gsm8k against a fake /generate: streaming records, metrics, error handling, pairing."""

from __future__ import annotations

import json
import random
import threading
import time

import pytest

from specsuite.errors import SpecsuiteError
from specsuite.families.gsm8k import GSM8KItem, paired_outcomes, run_gsm8k
from tests.helpers.native_fake import typed_generate

N_ITEMS = 40
FAILING_INDEX = 9  # not among the seed-1 shots (4, 7, 8, 16, 36)
ITEMS = [
    GSM8KItem(f"What is {i} + {i}?", f"{i} + {i} = <<{i}+{i}={2 * i}>>{2 * i}\n#### {2 * i}", 2 * i)
    for i in range(N_ITEMS)
]


def question_index(payload: dict) -> int:
    last_question = payload["text"].rsplit("Question: What is ", 1)[1]
    return int(last_question.split(" ", 1)[0])


def kind_of(index: int) -> str:
    """The fake model's behaviour per question: right, wrong number, or no number at all."""
    return ("correct", "incorrect", "invalid")[index % 3]


def completion_tokens(index: int) -> int:
    return 20 + index


def fake_generate(payload: dict) -> dict:
    index = question_index(payload)
    time.sleep(random.Random(index).uniform(0.0, 0.02))
    if index == FAILING_INDEX:
        raise ConnectionError("connection reset by peer\nsecond line of detail")
    text = {
        "correct": f" {index} + {index} = {2 * index}.\n#### {2 * index}",
        "incorrect": f" {index} + {index} = {2 * index + 1}.\n#### {2 * index + 1}",
        "invalid": " I do not know",
    }[kind_of(index)]
    return {
        "text": text,
        "output_ids": list(range(completion_tokens(index))),
        "meta_info": {
            "finish_reason": {"type": "stop", "matched": "Question"},
            "completion_tokens": completion_tokens(index),
            "spec_verify_ct": 10,
            "spec_accept_length": completion_tokens(index) / 10,
        },
    }


@pytest.fixture(scope="module")
def run() -> tuple:
    sunk: list[dict] = []
    sink_threads: set[str] = set()
    server_calls: list[int] = []

    def sink(record: dict) -> None:
        sink_threads.add(threading.current_thread().name)
        sunk.append(record)

    def server_accept_length() -> float:
        server_calls.append(len(sunk))
        return 3.25

    result = run_gsm8k(
        typed_generate(fake_generate),
        ITEMS,
        num_shots=5,
        parallel=8,
        seed=1,
        record_sink=sink,
        server_accept_length=server_accept_length,
        progress=False,
    )
    return result, sunk, sink_threads, server_calls


def test_every_question_yields_exactly_one_record(run: tuple) -> None:
    result, sunk, sink_threads, _ = run
    assert sorted(record["question_index"] for record in sunk) == list(result.plan.eval_indices)
    assert len(result.plan.eval_indices) == N_ITEMS - 5
    assert sink_threads == {threading.current_thread().name}  # the sink needs no locking
    assert [r.question_index for r in result.records] == sorted(r["question_index"] for r in sunk)
    assert sorted((r.to_dict() for r in result.records), key=lambda r: r["question_index"]) == sorted(sunk, key=lambda r: r["question_index"])


def test_failed_request_is_recorded_and_the_rest_finish(run: tuple) -> None:
    result, sunk, _, _ = run
    assert FAILING_INDEX in result.plan.eval_indices  # seed 1 keeps it out of the shots
    errors = [record for record in sunk if record["status"] == "error"]
    assert [record["question_index"] for record in errors] == [FAILING_INDEX]
    assert errors[0]["error"] == "ConnectionError: connection reset by peer"
    summary = result.to_dict()
    assert summary["n_errors"] == 1
    assert summary["n_answered"] == len(result.plan.eval_indices) - 1
    assert summary["errors"] == [{"question_index": FAILING_INDEX, "error": errors[0]["error"]}]


def test_records_carry_the_per_question_fields(run: tuple) -> None:
    result, _, _, _ = run
    record = next(r for r in result.records if r.status == "ok" and kind_of(r.question_index) == "correct")
    index = record.question_index
    assert record.label == 2 * index
    assert record.output_text.endswith(f"#### {2 * index}")
    assert record.output_ids_count == record.completion_tokens == completion_tokens(index)
    answer = str(2 * index)
    assert record.extracted == {"sglang": 2 * index, "lmeval_strict": answer, "lmeval_flexible": answer}
    assert record.outcome == {"sglang": "correct", "lmeval_strict": "correct", "lmeval_flexible": "correct"}
    assert record.finish_reason == {"type": "stop", "matched": "Question"}
    assert record.accept_length == pytest.approx(completion_tokens(index) / 10)
    assert len(record.prompt_hash) == 16 and record.latency_s > 0
    assert len({r.prompt_hash for r in result.records}) == len(result.records)
    assert list(record.to_dict()) == ["question_index", "prompt_hash", "label", "status", "output_text", "output_ids_count", "completion_tokens",
                                      "extracted", "outcome", "finish_reason", "spec_verify_ct", "accept_length", "latency_s"]


def test_metrics_match_the_fake_model(run: tuple) -> None:
    result, _, _, server_calls = run
    answered = [i for i in result.plan.eval_indices if i != FAILING_INDEX]
    summary = result.to_dict()
    expected = {kind: sum(kind_of(i) == kind for i in answered) for kind in ("correct", "incorrect", "invalid")}
    for definition, stats in summary["definitions"].items():
        assert (stats["n_correct"], stats["n_incorrect"], stats["n_invalid"]) == (
            expected["correct"],
            expected["incorrect"],
            expected["invalid"],
        ), definition
        assert stats["accuracy"]["value"] == pytest.approx(expected["correct"] / len(answered))
        low, high = stats["accuracy"]["ci_wilson"]
        assert low < stats["accuracy"]["value"] < high
    assert result.accuracy("sglang") == pytest.approx(expected["correct"] / len(answered))
    tokens = sum(completion_tokens(i) for i in answered)
    assert summary["output_tokens"] == tokens
    assert summary["output_throughput_tok_s"] == pytest.approx(tokens / summary["wall_time_s"])
    assert summary["latency_s"]["n"] == len(answered)
    assert summary["latency_s"]["max"] <= summary["wall_time_s"]
    mean_accept = sum(completion_tokens(i) / 10 for i in answered) / len(answered)
    assert summary["accept_length"]["mean"] == pytest.approx(mean_accept)
    assert summary["accept_length"]["server"] == 3.25
    assert server_calls == [len(result.records)]  # read once, after the last record
    assert summary["per_question"]["question_index"] == answered
    assert summary["per_question"]["correct"]["sglang"] == [kind_of(i) == "correct" for i in answered]
    json.dumps(summary)


def test_records_are_delivered_as_questions_finish() -> None:
    # Question 0 blocks until the sink has received some other record: if records were only
    # handed over at the end of the run, it would wait out its timeout instead.
    first_record = threading.Event()
    order: list[int] = []

    def generate(payload: dict) -> dict:
        index = question_index(payload)
        if index == 0:
            assert first_record.wait(timeout=5)
        return {"text": f"#### {2 * index}", "meta_info": {"completion_tokens": 3}}

    def sink(record: dict) -> None:
        order.append(record["question_index"])
        first_record.set()

    started = time.perf_counter()
    result = run_gsm8k(typed_generate(generate), ITEMS[:10], num_shots=0, parallel=4, record_sink=sink, progress=False)
    assert time.perf_counter() - started < 4
    assert order[0] != 0 and sorted(order) == list(range(10))
    assert result.accuracy() == 1.0


def test_malformed_and_aborted_responses_become_error_records() -> None:
    responses = {
        0: {"meta_info": {}},
        1: {"text": "", "meta_info": {"finish_reason": {"type": "abort", "message": "input too long"}}},
        2: {"text": "#### 4", "meta_info": {"completion_tokens": 2}},
    }
    result = run_gsm8k(typed_generate(lambda p: responses[question_index(p)]), ITEMS[:3], num_shots=0, parallel=2, progress=False)
    errors = {r.question_index: r.error for r in result.records if r.status == "error"}
    assert errors == {
        0: "ValueError: response is not a /generate object with a string 'text'",
        1: "RuntimeError: server aborted the request: input too long",
    }
    assert result.to_dict()["definitions"]["sglang"]["accuracy"]["k"] == 1


def test_paired_outcomes_align_questions_answered_in_both() -> None:
    def always_right(payload: dict) -> dict:
        index = question_index(payload)
        return {"text": f"#### {2 * index}", "meta_info": {"completion_tokens": 3}}

    arm_a = run_gsm8k(typed_generate(fake_generate), ITEMS, num_shots=5, seed=1, parallel=8, progress=False)
    arm_b = run_gsm8k(typed_generate(always_right), ITEMS, num_shots=5, seed=1, parallel=8, progress=False)
    paired = paired_outcomes(arm_a, arm_b.to_dict())
    expected_index = [i for i in arm_a.plan.eval_indices if i != FAILING_INDEX]
    assert paired.question_index == expected_index
    assert paired.a == [kind_of(i) == "correct" for i in expected_index]
    assert paired.b == [True] * len(expected_index)

    other_shots = run_gsm8k(typed_generate(always_right), ITEMS, num_shots=5, seed=2, parallel=8, progress=False)
    with pytest.raises(SpecsuiteError, match="different prompts"):
        paired_outcomes(arm_b, other_shots)
    with pytest.raises(SpecsuiteError, match="unknown GSM8K definition"):
        paired_outcomes(arm_a, arm_b, definition="exact")


def test_bad_parallel_is_rejected() -> None:
    with pytest.raises(SpecsuiteError, match="parallel must be >= 1"):
        run_gsm8k(typed_generate(fake_generate), ITEMS, parallel=0, progress=False)
