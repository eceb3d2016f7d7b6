"""The correctness family's own records beyond the generic `Case` (specsuite.results.types): a detector's totals."""

from __future__ import annotations

from dataclasses import dataclass

from specsuite.results.types import Record


@dataclass
class DetectorTotal(Record):
    """One detector's totals over a case's (or a GSM8K run's) answers (specsuite.families.correctness.detectors.aggregate);
    the defaults are a detector that found nothing in nothing (its 95 % upper bound 1)."""

    count: int = 0
    total: int = 0
    unit: str = "tokens"
    responses: int = 0
    responses_with_hits: int = 0
    rate: float | None = None
    upper95: float = 1.0
    per_1200_tokens: float | None = None  # stray_char only: the pooled rate per 1200 generated tokens
