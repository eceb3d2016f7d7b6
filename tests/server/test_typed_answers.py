"""The typed parsers of server answers, the kernel child's lines and the benchmark's JSONL line: each field read
as sent, absent ones None, and the line's table printed from its typed fields."""

from __future__ import annotations

import numpy as np

from specsuite.families.bench.bench_line import LATENCY_STATS, BenchLine
from specsuite.families.bench.record import build_record, format_table
from specsuite.kernels.child_messages import ChildAnswer, ChildReady, sampled_token_ids
from specsuite.server.bench_answers import ModelCard, reported_accept_length, reported_accept_lengths, tokenizer_path_of
from specsuite.server.meta_info import FinishReason, MetaInfo, VllmStepStats, meta_info_of


def test_child_lines_name_their_failure_or_the_whole_line() -> None:
    ready = ChildReady.parse({"ready": True, "vllm": "0.9.1", "device": "cuda:0"})
    assert (ready.ready, ready.vllm, ready.device) == (True, "0.9.1", "cuda:0")
    refused = ChildReady.parse({"ready": False, "error": "ImportError: vllm"})
    assert not refused.ready and refused.failure == "ImportError: vllm"
    assert ChildAnswer.parse({"ok": False}).failure == {"ok": False}
    assert ChildAnswer.parse({"ok": True, "seconds": 0.1}).ok
    assert sampled_token_ids({"output_token_ids": np.arange(3)}).tolist() == [0, 1, 2]


def test_server_answers_parse_as_sent() -> None:
    assert reported_accept_length({"internal_states": [{"avg_spec_accept_length": 2.5}]}) == 2.5
    assert reported_accept_length(None) is None and reported_accept_length({"internal_states": ["x"]}) is None
    assert reported_accept_lengths({"internal_states": [{"avg_spec_accept_length": 2}, {}, "x"]}) == [2]
    assert reported_accept_lengths({"internal_states": None}) == []
    assert tokenizer_path_of({"model_path": "/m"}) == "/m" and tokenizer_path_of({}) == ""
    card = ModelCard.first_of([{"id": "m", "root": "/m", "max_model_len": 4096}, {"id": "other"}])
    assert card == ModelCard(id="m", root="/m", max_model_len=4096)
    assert ModelCard.first_of([]) is None


def test_meta_info_and_finish_reason_fields() -> None:
    meta = MetaInfo.parse({"spec_verify_ct": 3, "completion_tokens": 9, "unrelated": 1})
    assert (meta.spec_verify_ct, meta.completion_tokens, meta.spec_accept_length) == (3, 9, None)
    assert MetaInfo.parse(None) == MetaInfo()
    assert FinishReason.parse({"type": "stop", "matched": "NaN happened"}).matched == "NaN happened"
    assert FinishReason.parse("stop") == FinishReason()
    assert VllmStepStats.parse({"per_step_accepted": [1], "per_step_drafted": [2]}) == VllmStepStats([1], [2])
    assert VllmStepStats.parse(None) is None
    assert meta_info_of({"meta_info": {"a": 1}}) == {"a": 1} and meta_info_of([]) is None


def test_the_table_prints_the_line_s_typed_fields() -> None:
    figures = {f"{stat}_{metric}_ms": 1.5 for stat in LATENCY_STATS for metric in ("e2e_latency", "ttft", "tpot", "itl", "chunk_itl")}
    line = build_record({"backend": "sglang", "request_rate": float("inf"), "max_concurrency": None, "seed": 1}, None,
                        {"completed": 4, "failed": 0, "max_itl_ms": 7.25, **figures}, {"itls": [[0.001]]}, "interrupted")
    assert line["request_rate"] == "inf" and line["run"] == {"seed": 1}
    table = format_table(line)
    assert "Status:" in table and "interrupted" in table
    assert "Max request concurrency:                 not set" in table
    assert "Max ITL (ms):                            7.25" in table
    assert "P99 chunk ITL (ms):                      1.50" in table
    typed = BenchLine.from_line(line)
    assert typed.completed == 4 and typed.to_dict() == line


def test_conversation_records_yield_their_first_pair() -> None:
    from specsuite.families.bench.conversation_records import BundledPromptLine, ShareGptConversation

    turns = [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}, {"value": 3}]
    assert ShareGptConversation.from_dict({"conversations": turns}).first_pair() == ("hi", "hello")
    assert ShareGptConversation.from_dict({"conversation": turns}).first_pair() == ("hi", "hello")
    assert ShareGptConversation.from_dict({"conversations": None, "conversation": turns}).first_pair() is None
    assert ShareGptConversation.from_dict({"conversations": [{"value": "hi"}, {"value": 2}]}).first_pair() is None
    assert ShareGptConversation.from_dict({}).first_pair() is None
    assert BundledPromptLine.from_dict({"question": "q", "answer": 4}).pair() == ("q", "4")
    assert BundledPromptLine.from_dict({"prompt": "p"}).pair() == ("p", "p")
    assert BundledPromptLine.from_dict({"prompt": ""}).pair() is None


def test_prompt_lines_take_their_id_kind_and_prompt(tmp_path) -> None:
    import pytest

    from specsuite.errors import SpecsuiteError
    from specsuite.families.correctness.prompts import PromptItem, load_prompts

    path = tmp_path / "prompts.jsonl"
    path.write_text('{"id": "a", "kind": "math", "prompt": "2+2"}\n\n{"prompt": "hello"}\n')
    assert load_prompts(path) == [PromptItem("a", "math", "2+2"), PromptItem("line-3", "prose", "hello")]
    path.write_text('{"id": "a"}\n')
    with pytest.raises(SpecsuiteError, match="prompts.jsonl:1"):
        load_prompts(path)
    path.write_text('["prompt"]\n')
    with pytest.raises(SpecsuiteError, match="prompts.jsonl:1"):
        load_prompts(path)
