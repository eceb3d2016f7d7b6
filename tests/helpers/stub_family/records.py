"""The stub family's record: sampled answers, and those that hold the sampler's fallback id (the last vocabulary row)."""

from __future__ import annotations

from dataclasses import dataclass

from specsuite.results.types import Record

RESULTS_KEY = "stub"  # its place among a repeat's workloads


@dataclass
class FallbackTally(Record):
    answers: int = 0
    with_fallback: int = 0
