"""Intervals for one proportion (Clopper–Pearson, Wilson) and for a difference of two (Newcombe).

Used for "k bad outputs in n": the suites report e.g. "0 of 3437, 95% upper bound 0.087%".
n = 0 trials carries no information and raises StatsInputError rather than returning (0, 1),
so an empty run cannot pass silently as "no errors".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from specsuite.stats._common import Result, StatsInputError, check_confidence, check_events
from specsuite.stats.lazy_scipy import stats


def _require_trials(n: int) -> None:
    if n == 0:
        raise StatsInputError("n=0 trials: a proportion needs at least one trial")


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact two-sided (Clopper–Pearson) interval for k events in n trials.

    Each tail holds at most (1 - confidence) / 2; k = 0 gives lower bound 0 and k = n upper
    bound 1. Raises StatsInputError for n = 0.
    """
    k, n = check_events(k, n)
    confidence = check_confidence(confidence)
    _require_trials(n)
    tail = (1.0 - confidence) / 2.0
    low = 0.0 if k == 0 else float(stats.beta.ppf(tail, k, n - k + 1))
    high = 1.0 if k == n else float(stats.beta.ppf(1.0 - tail, k + 1, n - k))
    return low, high


def clopper_pearson_upper(k: int, n: int, confidence: float = 0.95) -> float:
    """Exact one-sided upper bound: the largest rate with P(X <= k) >= 1 - confidence.

    For k = 0 this is 1 - (1 - confidence) ** (1 / n). Raises StatsInputError for n = 0.
    """
    k, n = check_events(k, n)
    confidence = check_confidence(confidence)
    _require_trials(n)
    return 1.0 if k == n else float(stats.beta.ppf(confidence, k + 1, n - k))


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for k events in n trials. Raises StatsInputError for n = 0."""
    k, n = check_events(k, n)
    confidence = check_confidence(confidence)
    _require_trials(n)
    return _wilson(k, n, float(stats.norm.ppf(0.5 + confidence / 2.0)))


def _wilson(k: int, n: int, z: float) -> tuple[float, float]:
    p = k / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1.0 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe_difference_interval(
    a_events: int, a_n: int, b_events: int, b_n: int, confidence: float = 0.95
) -> tuple[float, float]:
    """Newcombe's hybrid score interval (1998, method 10) for p_a - p_b.

    Combines the two Wilson intervals, so it stays sensible at 0 or n events, where the
    Wald interval collapses to a point.
    """
    a_events, a_n = check_events(a_events, a_n, "a_events", "a_n")
    b_events, b_n = check_events(b_events, b_n, "b_events", "b_n")
    confidence = check_confidence(confidence)
    _require_trials(a_n)
    _require_trials(b_n)
    z = float(stats.norm.ppf(0.5 + confidence / 2.0))
    pa, pb = a_events / a_n, b_events / b_n
    la, ua = _wilson(a_events, a_n, z)
    lb, ub = _wilson(b_events, b_n, z)
    diff = pa - pb
    low = diff - math.sqrt((pa - la) ** 2 + (ub - pb) ** 2)
    high = diff + math.sqrt((ua - pa) ** 2 + (pb - lb) ** 2)
    return max(-1.0, low), min(1.0, high)


@dataclass(frozen=True)
class ProportionEstimate(Result):
    """k events in n trials with exact (Clopper–Pearson) two-sided interval and one-sided upper bound."""

    k: int
    n: int
    proportion: float
    ci: tuple[float, float]
    upper_bound: float
    confidence: float


def proportion_estimate(k: int, n: int, confidence: float = 0.95) -> ProportionEstimate:
    """Summarise k of n: point estimate, exact two-sided CI and exact one-sided upper bound."""
    low_high = clopper_pearson(k, n, confidence)
    return ProportionEstimate(
        k=int(k),
        n=int(n),
        proportion=int(k) / int(n),
        ci=low_high,
        upper_bound=clopper_pearson_upper(k, n, confidence),
        confidence=float(confidence),
    )
