"""Equivalence tests (two one-sided tests, TOST): is the difference inside ±margin?

A non-significant difference is not evidence of no difference; TOST is. Equivalence is
declared when both one-sided nulls (effect <= lower bound, effect >= upper bound) are
rejected at alpha, which is the same as the (1 - 2 alpha) interval lying inside the bounds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from specsuite.stats._common import Result, StatsInputError, check_events, check_fraction, check_positive
from specsuite.stats.latency import welch_inputs
from specsuite.stats.lazy_scipy import stats


@dataclass(frozen=True)
class EquivalenceResult(Result):
    """TOST outcome. p_value = max(p_lower, p_upper); ci is the (1 - 2 alpha) interval.

    With relative=True, estimate, ci and bounds are ratios - 1 (e.g. 0.01 = +1%).
    """

    estimate: float
    ci: tuple[float, float]
    bounds: tuple[float, float]
    p_value: float
    p_lower: float
    p_upper: float
    alpha: float
    equivalent: bool
    relative: bool
    method: Literal["welch-t", "agresti-caffo-z"]
    n_a: int
    n_b: int


def tost_equivalence(
    a: Sequence[float],
    b: Sequence[float],
    margin: float,
    relative: bool = True,
    alpha: float = 0.05,
) -> EquivalenceResult:
    """TOST with two one-sided Welch t-tests (Student t probabilities from scipy.stats.t).

    relative=True (default): on log values, with ratio bounds [1 / (1 + margin), 1 + margin],
    symmetric on the log scale (margin 0.01 ≈ "within ±1%"); samples must be positive.
    relative=False: on raw means, bounds [-margin, +margin] in the samples' units.
    Needs at least two values per arm; refuses two constant samples.
    """
    margin = check_positive(margin, "margin")
    alpha = check_fraction(alpha, "alpha", upper=0.5)
    x, y = welch_inputs(a, b, relative)
    low, high = (-math.log1p(margin), math.log1p(margin)) if relative else (-margin, margin)
    diff, se, df = _welch(x, y)
    p_lower = float(stats.t.sf((diff - low) / se, df))
    p_upper = float(stats.t.cdf((diff - high) / se, df))
    half = float(stats.t.ppf(1.0 - alpha, df)) * se
    scale = math.expm1 if relative else float
    return _tost_result(scale(diff), (scale(diff - half), scale(diff + half)), (scale(low), scale(high)), p_lower, p_upper,
                        alpha, relative, "welch-t", int(x.size), int(y.size))


def _tost_result(estimate: float, ci: tuple[float, float], bounds: tuple[float, float], p_lower: float, p_upper: float,
                 alpha: float, relative: bool, method: Literal["welch-t", "agresti-caffo-z"], n_a: int, n_b: int) -> EquivalenceResult:
    """The TOST outcome: equivalent when the larger of the two one-sided p-values is below alpha."""
    p_value = max(p_lower, p_upper)
    return EquivalenceResult(estimate=estimate, ci=ci, bounds=bounds, p_value=p_value, p_lower=p_lower, p_upper=p_upper,
                             alpha=alpha, equivalent=p_value < alpha, relative=relative, method=method, n_a=n_a, n_b=n_b)


def _welch(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """Mean difference, its standard error and the Welch–Satterthwaite degrees of freedom.

    Same quantities as scipy.stats.ttest_ind(equal_var=False), computed once instead of
    three scipy calls (TOST needs two shifted one-sided tests and an interval).
    """
    var_x, var_y = float(np.var(x, ddof=1)) / x.size, float(np.var(y, ddof=1)) / y.size
    total = var_x + var_y
    df = total**2 / (var_x**2 / (x.size - 1) + var_y**2 / (y.size - 1))
    return float(np.mean(x) - np.mean(y)), math.sqrt(total), df


def tost_proportions(
    a_events: int, a_n: int, b_events: int, b_n: int, margin: float, alpha: float = 0.05
) -> EquivalenceResult:
    """TOST for p_a - p_b within ±margin (absolute, e.g. 0.01 = one percentage point).

    Two one-sided z-tests with the Agresti–Caffo (2000) adjustment: one event and one
    non-event added to each arm, which keeps the standard error positive at 0 or n events.
    estimate is the raw difference; ci (1 - 2 alpha) is centred on the adjusted difference.
    Large-sample approximation: with only a handful of trials per arm it is rough.
    """
    a_events, a_n = check_events(a_events, a_n, "a_events", "a_n")
    b_events, b_n = check_events(b_events, b_n, "b_events", "b_n")
    if a_n == 0 or b_n == 0:
        raise StatsInputError("tost_proportions needs at least one trial in each arm (a_n, b_n > 0)")
    margin = check_positive(margin, "margin")
    alpha = check_fraction(alpha, "alpha", upper=0.5)
    pa, pb = (a_events + 1) / (a_n + 2), (b_events + 1) / (b_n + 2)
    centre = pa - pb
    se = math.sqrt(pa * (1 - pa) / (a_n + 2) + pb * (1 - pb) / (b_n + 2))
    p_lower = float(stats.norm.sf((centre + margin) / se))
    p_upper = float(stats.norm.cdf((centre - margin) / se))
    z = float(stats.norm.ppf(1.0 - alpha))
    return _tost_result(a_events / a_n - b_events / b_n, (centre - z * se, centre + z * se), (-margin, margin), p_lower, p_upper,
                        alpha, False, "agresti-caffo-z", a_n, b_n)
