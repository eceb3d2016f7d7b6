"""One-word verdict for an A/B comparison, asv-style: significance AND a practical effect size."""

from __future__ import annotations

import math
from numbers import Real
from typing import Literal

from specsuite.stats._common import StatsInputError, check_fraction
from specsuite.stats.equivalence import EquivalenceResult

Verdict = Literal["better", "worse", "equivalent", "inconclusive"]


def verdict(
    p_value: float,
    effect: float,
    ci: tuple[float, float],
    practical_threshold: float,
    higher_is_better: bool,
    equivalence: bool | EquivalenceResult | None = None,
    alpha: float = 0.05,
) -> Verdict:
    """Classify a comparison of the arm under test against the reference.

    `effect`, `ci` and `practical_threshold` share one scale (e.g. relative change 0.004 with
    threshold 0.01); effect > 0 means the tested arm's value is higher. Rules, in order:

    1. "worse": p_value < alpha and the effect points in the bad direction (up when
       higher_is_better is False, down when True) with |effect| > practical_threshold.
    2. "better": the same, in the good direction.
    3. "equivalent": if `equivalence` is given (a TOST result or its boolean), exactly when it
       says equivalent; otherwise when the interval lies within
       [-practical_threshold, +practical_threshold] (inclusive). A significant but
       practically negligible change lands here.
    4. "inconclusive": everything else (e.g. not significant with a wide interval, or a
       significant change whose interval still reaches past the threshold while its point
       estimate does not).
    """
    if not (isinstance(p_value, Real) and 0.0 <= p_value <= 1.0):
        raise StatsInputError(f"p_value must lie in [0, 1]; got {p_value!r}")
    if not (isinstance(effect, Real) and math.isfinite(effect)):
        raise StatsInputError(f"effect must be a finite number; got {effect!r}")
    low, high = ci
    if math.isnan(low) or math.isnan(high) or low > high:
        raise StatsInputError(f"ci must be (low, high) with low <= high; got {ci!r}")
    if not (isinstance(practical_threshold, Real) and 0.0 <= practical_threshold < math.inf):
        raise StatsInputError(f"practical_threshold must be a finite number >= 0; got {practical_threshold!r}")
    check_fraction(alpha, "alpha")

    if p_value < alpha and abs(effect) > practical_threshold:
        return "better" if (effect > 0) == higher_is_better else "worse"
    if isinstance(equivalence, EquivalenceResult):
        equivalence = equivalence.equivalent
    if equivalence is None:
        equivalence = -practical_threshold <= low and high <= practical_threshold
    return "equivalent" if equivalence else "inconclusive"
