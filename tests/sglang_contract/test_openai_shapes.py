"""The OpenAI answer shapes the harness parses and the reference server sends, read from SGLang
0.5.23's pydantic models (srt/entrypoints/openai/protocol.py)."""

from __future__ import annotations

import ast

from specsuite.families.integrity.openai_rules import CHAT, COMPLETIONS, FINISH_TYPES


def _model_fields(source: str, class_name: str) -> dict[str, ast.expr]:
    cls = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef) and n.name == class_name)
    return {n.target.id: n.annotation for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}


def _literal_values(annotation: ast.expr) -> set[str]:
    return {n.value for n in ast.walk(annotation) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def test_finish_reasons_are_the_models_literals(sglang_source):
    """A finish_reason outside these is a finding, so the sets must be SGLang's own
    (protocol.py:506-511 CompletionResponseChoice, 546-551 the stream choice, 1307-1315
    ChatCompletionResponseChoice, 1369-1377 the chat stream choice)."""
    source = sglang_source("srt/entrypoints/openai/protocol.py")
    for api, classes in ((COMPLETIONS, ("CompletionResponseChoice", "CompletionResponseStreamChoice")),
                         (CHAT, ("ChatCompletionResponseChoice", "ChatCompletionResponseStreamChoice"))):
        for name in classes:
            assert _literal_values(_model_fields(source, name)["finish_reason"]) == set(FINISH_TYPES[api]), name


def test_fields_the_harness_reads_exist(sglang_source):
    """The choice, logprobs, delta and usage fields specsuite/server/openai_client.py and
    specsuite/families/integrity/openai_rules.py read (protocol.py:150-154 LogProbs, 221-229 UsageInfo,
    506-514 and 546-554 the completion choices, 568-575 the stream chunk, 1307-1320 and
    1354-1378 chat)."""
    source = sglang_source("srt/entrypoints/openai/protocol.py")
    wanted = {
        "LogProbs": {"text_offset", "token_logprobs", "tokens", "top_logprobs"},
        "UsageInfo": {"prompt_tokens", "completion_tokens", "total_tokens"},
        "CompletionResponseChoice": {"index", "text", "logprobs", "finish_reason", "matched_stop", "token_ids", "prompt_token_ids"},
        "CompletionResponseStreamChoice": {"index", "text", "logprobs", "finish_reason", "matched_stop", "token_ids", "prompt_token_ids"},
        "CompletionStreamResponse": {"id", "choices", "usage"},
        "ChatCompletionResponseChoice": {"index", "message", "logprobs", "finish_reason", "matched_stop", "response_token_ids"},
        "ChatCompletionResponseStreamChoice": {"index", "delta", "logprobs", "finish_reason", "matched_stop"},
        "DeltaMessage": {"role", "content", "reasoning_content", "tool_calls"},
        "ChoiceLogprobs": {"content"},
    }
    for name, fields in wanted.items():
        assert fields <= set(_model_fields(source, name)), (name, sorted(fields - set(_model_fields(source, name))))
