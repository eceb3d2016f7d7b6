"""A GSM8K run's per-question table as results.json writes it (GSM8KResult.to_dict's `per_question`), typed:
one column per field, each in question order; `correct` holds one column per answer definition."""

from __future__ import annotations

from dataclasses import dataclass, field

from specsuite.results.types import Record


@dataclass
class PerQuestionTable(Record):
    """The per-question columns that pairing two runs reads; the table's other columns stay in ``extra``."""

    question_index: list[int] = field(default_factory=list)
    prompt_hash: list[str] = field(default_factory=list)
    correct: dict[str, list[bool]] = field(default_factory=dict)  # definition -> one flag per question
