"""Stubby's integrity rule: `meta_info.completion_tokens` counts the output ids of every answer."""

from __future__ import annotations

from typing import Any

from specsuite.server.integrity_rules import Violation


def check_answer(answer: dict[str, Any]) -> list[Violation]:
    ids, counted = answer["output_ids"], answer["meta_info"]["completion_tokens"]
    if counted == len(ids):
        return []
    return [Violation("completion_tokens", f"completion_tokens {counted} but {len(ids)} output ids")]
