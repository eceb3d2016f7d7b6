"""A native /generate answer as the integrity suite reads it: the server's JSON parsed in this one place,
its fields typed for the tests (suites/test_integrity.py) and their probe (specsuite/pytest_plugin/integrity.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class NativeAnswer:
    """The ids, text and finish reason of one native answer (SGLang's /generate, or a server speaking it)."""

    output_ids: list[int]
    text: str
    finish_reason: Any  # SGLang's finish object ({"type": "stop", "matched": ...}), as the server sent it

    @classmethod
    def of(cls, answer: dict[str, Any]) -> NativeAnswer:
        # Wire parsing: the keys of SGLang's /generate answer.
        return cls(answer["output_ids"], answer["text"], (answer.get("meta_info") or {}).get("finish_reason"))

    @property
    def finish_type(self) -> str | None:
        """The finish reason's type ("stop", "length", "abort"), None when the server gave none."""
        # Wire parsing: SGLang's finish object.
        return self.finish_reason.get("type") if isinstance(self.finish_reason, dict) else None


def output_ids_of(answer: dict[str, Any]) -> list[int]:
    return NativeAnswer.of(answer).output_ids


def text_of(answer: dict[str, Any]) -> str:
    return NativeAnswer.of(answer).text


def ids_if_any(answer: dict[str, Any]) -> list[int]:
    """The answer's output ids; [] when it names none (a streamed answer may lack them)."""
    return list(answer.get("output_ids") or [])


def output_top_logprobs_of(answer: dict[str, Any]) -> list[Any]:
    """The answer's per-position top logprobs (asked with top_logprobs_num); [] when it has none."""
    return (answer.get("meta_info") or {}).get("output_top_logprobs") or []
