"""The serving benchmark's text sources, one typed record per file format: a ShareGPT conversation (JSON or JSONL)
and a line of the project's bundled prompt files (specsuite/fixtures/data). Each yields the (prompt, reply) pair the
request builder draws from, or None when the record has none."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specsuite.results.types import Record


@dataclass
class ShareGptTurn(Record):
    """One turn of a conversation; `from` and the rest stay in ``extra``."""

    value: Any = None


@dataclass
class ShareGptConversation(Record):
    """A ShareGPT record: its turns under `conversations` (or `conversation`, as some copies name it)."""

    conversations: Any = None
    conversation: Any = None

    def first_pair(self) -> tuple[str, str] | None:
        """(first human turn, first reply) when the first two turns are objects with text values."""
        turns = self.conversations if self.has("conversations") else self.conversation if self.has("conversation") else []
        if not isinstance(turns, list) or len(turns) < 2 or not all(isinstance(turn, dict) for turn in turns[:2]):
            return None
        prompt, reply = (ShareGptTurn.from_dict(turn).value for turn in turns[:2])
        return (prompt, reply) if isinstance(prompt, str) and isinstance(reply, str) else None


@dataclass
class BundledPromptLine(Record):
    """A bundled prompt file's line: the prompt (`prompt`, or a GSM8K-style `question`) and its reply (`answer`,
    else `reference`, else the prompt itself)."""

    prompt: Any = None
    question: Any = None
    answer: Any = None
    reference: Any = None

    def pair(self) -> tuple[str, str] | None:
        prompt = self.prompt or self.question
        reply = self.answer or self.reference or prompt
        return (prompt, str(reply)) if isinstance(prompt, str) and prompt else None
