"""Comparisons of event counts between two arms: Poisson rates with exposure, 2x2 tables, paired binary outcomes.

Conventions for the whole package: the first arm is the one under test (candidate, "fix"),
the second the reference (nightly, "nofix"); differences are first - second, ratios
first / second, and alternative="greater" means the first is larger. One-sided alternatives
give one-sided intervals at `confidence`, so "p < 1 - confidence" and "the interval excludes
the null value" agree (up to the usual exact-test caveats for two-sided p-values).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specsuite.stats._common import (
    Alternative,
    Result,
    StatsInputError,
    check_alternative,
    check_confidence,
    check_count,
    check_events,
    check_positive,
    open_side,
    two_sided_level,
)
from specsuite.stats.lazy_scipy import stats
from specsuite.stats.proportions import clopper_pearson, newcombe_difference_interval


@dataclass(frozen=True)
class RateComparison(Result):
    """Two Poisson rates (events per unit exposure, e.g. stray tokens per generated token)."""

    events1: int
    exposure1: float
    events2: int
    exposure2: float
    rate1: float
    rate2: float
    rate_ratio: float  # nan when both arms have zero events; inf when only arm 2 has none
    rate_ratio_ci: tuple[float, float]
    rate_difference: float
    rate_difference_ci: tuple[float, float]
    p_value: float
    alternative: Alternative
    confidence: float


def rate_ratio_test(k1: int, e1: float, k2: int, e2: float, alternative: Alternative = "two-sided", confidence: float = 0.95) -> RateComparison:
    """Exact conditional test of two Poisson rates, k1 events in exposure e1 vs k2 in e2.

    Under H0 (equal rates) k1 given k1 + k2 is Binomial(k1 + k2, e1 / (e1 + e2)); the p-value
    is scipy.stats.binomtest on that. The rate-ratio interval is the Clopper–Pearson interval
    for the binomial proportion pi mapped through R = pi * e2 / ((1 - pi) * e1), so it is exact
    too. The rate-difference interval is MOVER (Li, Tang & Wong 2011) built on the exact
    (Garwood) Poisson limits of each rate, which stays usable with zero events.
    With no events in either arm the data say nothing: p = 1 and the ratio interval is (0, inf).
    """
    k1, k2 = check_count(k1, "k1"), check_count(k2, "k2")
    e1, e2 = check_positive(e1, "e1"), check_positive(e2, "e2")
    alternative = check_alternative(alternative)
    confidence = check_confidence(confidence)
    level = two_sided_level(confidence, alternative)
    total = k1 + k2
    rate1, rate2 = k1 / e1, k2 / e2

    if total == 0:
        p_value, pi_ci = 1.0, (0.0, 1.0)
    else:
        p_value = float(stats.binomtest(k1, total, e1 / (e1 + e2), alternative=alternative).pvalue)
        pi_ci = open_side(clopper_pearson(k1, total, level), alternative, 0.0, 1.0)

    def pi_to_ratio(pi: float) -> float:
        return math.inf if pi >= 1.0 else pi * e2 / ((1.0 - pi) * e1)

    if k2 > 0:
        ratio = rate1 / rate2
    else:
        ratio = math.inf if k1 > 0 else math.nan

    return RateComparison(
        events1=k1,
        exposure1=e1,
        events2=k2,
        exposure2=e2,
        rate1=rate1,
        rate2=rate2,
        rate_ratio=ratio,
        rate_ratio_ci=(pi_to_ratio(pi_ci[0]), pi_to_ratio(pi_ci[1])),
        rate_difference=rate1 - rate2,
        rate_difference_ci=open_side(
            _mover_rate_difference(k1, e1, k2, e2, level), alternative, -math.inf, math.inf
        ),
        p_value=p_value,
        alternative=alternative,
        confidence=confidence,
    )


def _poisson_rate_limits(k: int, exposure: float, level: float) -> tuple[float, float]:
    """Exact (Garwood) two-sided limits for a Poisson rate."""
    tail = (1.0 - level) / 2.0
    low = 0.0 if k == 0 else float(stats.chi2.ppf(tail, 2 * k)) / (2.0 * exposure)
    high = float(stats.chi2.ppf(1.0 - tail, 2 * k + 2)) / (2.0 * exposure)
    return low, high


def _mover_rate_difference(k1: int, e1: float, k2: int, e2: float, level: float) -> tuple[float, float]:
    r1, r2 = k1 / e1, k2 / e2
    l1, u1 = _poisson_rate_limits(k1, e1, level)
    l2, u2 = _poisson_rate_limits(k2, e2, level)
    diff = r1 - r2
    return (
        diff - math.sqrt((r1 - l1) ** 2 + (u2 - r2) ** 2),
        diff + math.sqrt((u1 - r1) ** 2 + (r2 - l2) ** 2),
    )


@dataclass(frozen=True)
class ProportionComparison(Result):
    """Two independent proportions a_events/a_n vs b_events/b_n (Fisher's exact test)."""

    a_events: int
    a_n: int
    b_events: int
    b_n: int
    proportion_a: float
    proportion_b: float
    odds_ratio: float  # conditional MLE; nan when no events (or no non-events) at all
    odds_ratio_ci: tuple[float, float] | None  # None when not requested
    risk_difference: float
    risk_difference_ci: tuple[float, float]
    p_value: float
    alternative: Alternative
    confidence: float


def fisher_exact_2x2(a_events: int, a_n: int, b_events: int, b_n: int, alternative: Alternative = "two-sided", confidence: float = 0.95,
                     odds_ratio_ci: bool = True) -> ProportionComparison:
    """Fisher's exact test of a_events/a_n vs b_events/b_n.

    p-value: scipy.stats.fisher_exact. Odds ratio: conditional MLE with its exact
    conditional interval (scipy.stats.contingency.odds_ratio). The exact odds-ratio interval
    costs tens of milliseconds per table; pass odds_ratio_ci=False in bulk loops (the field
    is then None). Risk difference: Newcombe's hybrid score interval.
    """
    a_events, a_n = check_events(a_events, a_n, "a_events", "a_n")
    b_events, b_n = check_events(b_events, b_n, "b_events", "b_n")
    if a_n == 0 or b_n == 0:
        raise StatsInputError("fisher_exact_2x2 needs at least one trial in each arm (a_n, b_n > 0)")
    alternative = check_alternative(alternative)
    confidence = check_confidence(confidence)
    table = [[a_events, a_n - a_events], [b_events, b_n - b_events]]
    p_value = float(stats.fisher_exact(table, alternative=alternative).pvalue)
    odds = stats.contingency.odds_ratio(table, kind="conditional")
    or_ci = None
    if odds_ratio_ci:
        ci = odds.confidence_interval(confidence_level=confidence, alternative=alternative)
        or_ci = (float(ci.low), float(ci.high))
    diff_ci = newcombe_difference_interval(
        a_events, a_n, b_events, b_n, two_sided_level(confidence, alternative)
    )
    return ProportionComparison(a_events=a_events, a_n=a_n, b_events=b_events, b_n=b_n, proportion_a=a_events / a_n, proportion_b=b_events / b_n,
                                odds_ratio=float(odds.statistic), odds_ratio_ci=or_ci, risk_difference=a_events / a_n - b_events / b_n,
                                risk_difference_ci=open_side(diff_ci, alternative, -1.0, 1.0), p_value=p_value, alternative=alternative, confidence=confidence)


@dataclass(frozen=True)
class PairedComparison(Result):
    """Paired binary outcomes (e.g. the same GSM8K questions answered by arms A and B).

    a_only: pairs A got right and B wrong; b_only: B right and A wrong.
    difference = accuracy_a - accuracy_b = (a_only - b_only) / n_pairs.
    """

    a_only: int
    b_only: int
    n_pairs: int
    difference: float
    difference_ci: tuple[float, float]
    p_value: float
    alternative: Alternative
    confidence: float


def mcnemar_exact(b: int, c: int, n_pairs: int, alternative: Alternative = "two-sided", confidence: float = 0.95) -> PairedComparison:
    """Exact McNemar test from the discordant counts b (A right, B wrong) and c (B right, A wrong).

    p-value: b | b + c ~ Binomial(b + c, 1/2) under H0 (scipy.stats.binomtest); p = 1 when
    there are no discordant pairs. alternative="greater" means A is more accurate.
    The paired difference (b - c) / n_pairs gets the Agresti–Min (2005) interval: Wald on the
    table with 0.5 added to each of its four cells, which behaves well even when b = c = 0.
    n_pairs is the total number of pairs, concordant ones included.
    """
    b, c, n_pairs = check_count(b, "b"), check_count(c, "c"), check_count(n_pairs, "n_pairs")
    if n_pairs == 0:
        raise StatsInputError("mcnemar_exact needs at least one pair (n_pairs > 0)")
    if b + c > n_pairs:
        raise StatsInputError(f"discordant pairs b + c = {b + c} exceed n_pairs = {n_pairs}")
    alternative = check_alternative(alternative)
    confidence = check_confidence(confidence)
    discordant = b + c
    p_value = 1.0 if discordant == 0 else float(stats.binomtest(b, discordant, 0.5, alternative=alternative).pvalue)

    z = float(stats.norm.ppf(0.5 + two_sided_level(confidence, alternative) / 2.0))
    b_adj, c_adj, n_adj = b + 0.5, c + 0.5, n_pairs + 2.0
    centre = (b_adj - c_adj) / n_adj
    half = z * math.sqrt((b_adj + c_adj) - (b_adj - c_adj) ** 2 / n_adj) / n_adj
    ci = open_side((max(-1.0, centre - half), min(1.0, centre + half)), alternative, -1.0, 1.0)
    return PairedComparison(a_only=b, b_only=c, n_pairs=n_pairs, difference=(b - c) / n_pairs, difference_ci=ci, p_value=p_value, alternative=alternative,
                            confidence=confidence)


def mcnemar_from_pairs(
    a_correct: Sequence[bool],
    b_correct: Sequence[bool],
    alternative: Alternative = "two-sided",
    confidence: float = 0.95,
) -> PairedComparison:
    """mcnemar_exact on per-item outcomes; item i of both sequences must be the same question."""
    a = _as_bools(a_correct, "a_correct")
    b = _as_bools(b_correct, "b_correct")
    if a.size != b.size:
        raise StatsInputError(f"paired outcomes differ in length: a_correct has {a.size}, b_correct {b.size}")
    return mcnemar_exact(
        int(np.sum(a & ~b)), int(np.sum(~a & b)), int(a.size), alternative=alternative, confidence=confidence
    )


def _as_bools(values: Sequence[bool], name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1 or arr.size == 0:
        raise StatsInputError(f"{name} must be a non-empty one-dimensional sequence of booleans")
    if arr.dtype != bool:
        if arr.dtype.kind not in "iuf" or not np.all((arr == 0) | (arr == 1)):
            raise StatsInputError(f"{name} must hold booleans (or 0/1)")
        arr = arr.astype(bool)
    return arr
