"""Aggregate GSM8K per-question records into accuracy, invalid rate, latency, throughput and accept length.

Proportions get Wilson and Clopper-Pearson (exact) 95% intervals from ``scipy.stats.binomtest``.
Their denominator is the number of questions that got a response; requests that raised are
counted separately as errors. Latency statistics follow SGLang bench_serving conventions: numpy
linear-interpolation percentiles and population standard deviation (ddof=0).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from specsuite.families.gsm8k.records import Gsm8kAnswer
from specsuite.families.gsm8k.scoring import DEFINITIONS
from specsuite.stats.lazy_scipy import stats

__all__ = ["CONFIDENCE", "accept_length_summary", "definition_summary", "latency_summary", "proportion"]

CONFIDENCE = 0.95


def proportion(successes: int, trials: int, confidence: float = CONFIDENCE) -> dict[str, Any]:
    """A proportion with its Wilson and exact intervals; None everywhere when there are no trials."""
    if trials == 0:
        return {"k": 0, "n": 0, "value": None, "ci_wilson": None, "ci_exact": None}
    test = stats.binomtest(successes, trials)
    wilson = test.proportion_ci(confidence_level=confidence, method="wilson")
    exact = test.proportion_ci(confidence_level=confidence, method="exact")
    return {
        "k": successes,
        "n": trials,
        "value": successes / trials,
        "ci_wilson": [float(wilson.low), float(wilson.high)],
        "ci_exact": [float(exact.low), float(exact.high)],
    }


def _outcomes(records: Sequence[Gsm8kAnswer], definition: str) -> list[str]:
    if definition not in DEFINITIONS:
        raise ValueError(f"unknown GSM8K definition {definition!r}")
    return [record.outcome[definition] for record in records]


def accuracy_of(records: Sequence[Gsm8kAnswer], definition: str) -> float | None:
    """Fraction correct under one definition, over answered records; None without any (definition_summary's accuracy value)."""
    outcomes = _outcomes(records, definition)
    return outcomes.count("correct") / len(outcomes) if outcomes else None


def definition_summary(records: Sequence[Gsm8kAnswer], definition: str) -> dict[str, Any]:
    """Counts, accuracy and invalid fraction under one definition, over answered records."""
    outcomes = _outcomes(records, definition)
    answered = len(outcomes)
    correct = outcomes.count("correct")
    invalid = outcomes.count("invalid")
    return {
        "n_correct": correct,
        "n_incorrect": outcomes.count("incorrect"),
        "n_invalid": invalid,
        "accuracy": proportion(correct, answered),
        "invalid": proportion(invalid, answered),
    }


def latency_summary(latencies_s: Iterable[float]) -> dict[str, float | int | None]:
    """Per-request latency statistics in seconds."""
    values = np.asarray(list(latencies_s), dtype=float)
    if values.size == 0:
        return {"n": 0, **dict.fromkeys(("mean", "median", "std", "min", "max", "p90", "p95", "p99"))}
    p90, p95, p99 = np.percentile(values, [90, 95, 99])
    return {
        "n": int(values.size),
        "mean": float(values.mean()),
        "median": float(np.median(values)),
        "std": float(values.std()),
        "min": float(values.min()),
        "max": float(values.max()),
        "p90": float(p90),
        "p95": float(p95),
        "p99": float(p99),
    }


def accept_length_summary(
    records: Sequence[Gsm8kAnswer], server_value: float | None = None
) -> dict[str, float | int | None]:
    """Speculative accept length: per-request mean, token-pooled ratio, and the server's own figure.

    ``mean`` averages each request's ``accept_length``; ``pooled`` is
    Σcompletion_tokens / Σspec_verify_ct over requests that report a verify count (the SGLang
    batch-test statistic); ``server`` is whatever the caller read from the server after the run.
    """
    per_request = [record.accept_length for record in records if record.accept_length is not None]
    verified = [record for record in records if record.spec_verify_ct]
    verify_steps = sum(record.spec_verify_ct or 0 for record in verified)
    tokens = sum(record.completion_tokens or 0 for record in verified)
    return {
        "n": len(per_request),
        "mean": float(np.mean(per_request)) if per_request else None,
        "pooled": tokens / verify_steps if verify_steps else None,
        "server": server_value,
    }
