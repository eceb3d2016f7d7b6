"""Prompt sets for the correctness workload: the project's default set, or a user JSONL file."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specsuite.errors import SpecsuiteError
from specsuite.project_paths import DATA_DIR
from specsuite.results.types import Record

DEFAULT_PROMPTS = DATA_DIR / "correctness_prompts.jsonl"


@dataclass(frozen=True)
class PromptItem:
    """One prompt: a stable id, its kind (prose, chat, math, ...) and the raw text sent."""

    id: str
    kind: str
    prompt: str


@dataclass
class PromptLine(Record):
    """One line of a prompts file as written: `prompt` required, `id` and `kind` optional."""

    id: Any = None
    kind: Any = "prose"
    prompt: Any = None

    def item(self, number: int) -> PromptItem:
        """The prompt it names (id `line-<number>` when it has none); KeyError without a prompt."""
        if not self.has("prompt"):
            raise KeyError("prompt")
        return PromptItem(str(self.id) if self.has("id") else f"line-{number}", str(self.kind), str(self.prompt))


def load_prompts(path: str | Path | None = None) -> list[PromptItem]:
    """Read a JSONL file of {"id", "kind", "prompt"} rows (only "prompt" is required)."""
    source = Path(path) if path else DEFAULT_PROMPTS
    try:
        lines = source.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise SpecsuiteError(f"cannot read prompt file {source}: {exc.strerror}") from None
    items = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            items.append(PromptLine.from_dict(json.loads(line)).item(number))
        except (ValueError, KeyError, AttributeError):
            raise SpecsuiteError(f"{source}:{number}: expected a JSON object with a \"prompt\" field") from None
    if not items:
        raise SpecsuiteError(f"prompt file {source} holds no prompts")
    return items
