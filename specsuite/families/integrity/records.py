"""The integrity suite's records: every checked answer's violations (``workloads.integrity_checks``) and the suite's
tests (``workloads.integrity``).  The results model keeps them raw (`Workloads.part`); `integrity_totals` reads the
totals typed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from specsuite.families.lossless.records import NearTieRule  # the near-tie rule greedy equality and the integrity tests share
from specsuite.results.types import Record, Workloads


@dataclass
class IntegrityTotals(Record):
    """A repeat's ``workloads.integrity_checks`` totals (specsuite.families.integrity.recorder), read typed."""

    answers_checked: int | None = None
    streams_checked: int | None = None
    violations: int | None = None


@dataclass
class IntegrityChecks(Record):
    """Every checked answer's violations of the session (IntegrityRecorder.totals): counts per check and per
    source (the test that made the request), and a few quotes per check."""

    answers_checked: int = 0
    streams_checked: int = 0
    violations: int = 0
    counts: dict[str, int] = field(default_factory=dict)  # check -> violations, the checks that had any
    by_source: dict[str, dict[str, int]] = field(default_factory=dict)  # test node id -> check -> violations
    quotes: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # check -> violations quoted, with their source


@dataclass
class IntegrityTestOutcome(Record):
    """One integrity test's outcome: cases run, failures (a few quoted), near-tie numerics and divergences."""

    cases: int = 0
    failures: int = 0
    examples: list[str] = field(default_factory=list)
    numerics: int = 0
    numerics_examples: list[str] = field(default_factory=list)
    divergences: int = 0


@dataclass
class IntegrityResults(Record):
    """The integrity suite's tests (specsuite/pytest_plugin/integrity.py): each test's outcome, the near-tie rule, divergences."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {"tests": ("map", IntegrityTestOutcome), "near_tie": ("one", NearTieRule)}

    num_draft_tokens: int = 0
    tests: dict[str, IntegrityTestOutcome] = field(default_factory=dict)  # test name -> outcome
    near_tie: NearTieRule | None = None
    divergences: dict[str, list[str]] = field(default_factory=dict)  # test name -> divergences kept


def integrity_totals(workloads: Workloads) -> IntegrityTotals:
    """A repeat's integrity-check totals (empty when it wrote none, or not as an object)."""
    written = workloads.part("integrity_checks")
    return IntegrityTotals.from_dict(written if isinstance(written, dict) else {})
