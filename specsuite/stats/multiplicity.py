"""Multiple-comparison adjustment across the suite's tests (Holm; Benjamini–Hochberg; a per-run budget split over a family)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from specsuite.stats._common import Result, StatsInputError, check_fraction
from specsuite.stats.lazy_scipy import stats


@dataclass(frozen=True)
class AdjustedPValues(Result):
    """Adjusted p-values in input order; names is None when plain sequences were given."""

    method: Literal["holm", "bh"]
    alpha: float
    names: tuple[str, ...] | None
    p_values: tuple[float, ...]
    adjusted: tuple[float, ...]
    reject: tuple[bool, ...]

    def by_name(self) -> dict[str, tuple[float, bool]]:
        """name -> (adjusted p, reject); needs named input."""
        if self.names is None:
            raise StatsInputError("these p-values were given without names; use .adjusted and .reject")
        return {n: (p, r) for n, p, r in zip(self.names, self.adjusted, self.reject, strict=True)}


def _prepare(
    p_values: Mapping[str, float] | Sequence[float], alpha: float
) -> tuple[tuple[str, ...] | None, np.ndarray]:
    check_fraction(alpha, "alpha")
    names = tuple(str(k) for k in p_values) if isinstance(p_values, Mapping) else None
    values = list(p_values.values()) if isinstance(p_values, Mapping) else list(p_values)
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise StatsInputError("p-values must be numbers") from None
    if arr.ndim != 1 or not np.all((arr >= 0.0) & (arr <= 1.0)):
        bad = [v for v in values if not (isinstance(v, (int, float)) and 0.0 <= v <= 1.0)]
        raise StatsInputError(f"p-values must lie in [0, 1]; got {bad[:3]}")
    return names, arr


def _result(
    method: Literal["holm", "bh"], alpha: float, names: tuple[str, ...] | None, p: np.ndarray, adjusted: np.ndarray
) -> AdjustedPValues:
    return AdjustedPValues(
        method=method,
        alpha=float(alpha),
        names=names,
        p_values=tuple(float(v) for v in p),
        adjusted=tuple(float(v) for v in adjusted),
        reject=tuple(bool(v <= alpha) for v in adjusted),
    )


def holm(p_values: Mapping[str, float] | Sequence[float], alpha: float = 0.05) -> AdjustedPValues:
    """Holm–Bonferroni step-down; controls the family-wise error rate at alpha.

    Sorted ascending, p_(i) is scaled by (m - i + 1); adjusted values are made monotone by a
    running maximum and capped at 1. Reject where adjusted <= alpha.
    """
    names, p = _prepare(p_values, alpha)
    m = p.size
    order = np.argsort(p, kind="stable")
    scaled = (m - np.arange(m)) * p[order]
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(1.0, np.maximum.accumulate(scaled)) if m else scaled
    return _result("holm", alpha, names, p, adjusted)


def benjamini_hochberg(p_values: Mapping[str, float] | Sequence[float], alpha: float = 0.05) -> AdjustedPValues:
    """Benjamini–Hochberg (scipy.stats.false_discovery_control); controls the false discovery rate."""
    names, p = _prepare(p_values, alpha)
    adjusted = stats.false_discovery_control(p, method="bh") if p.size else p
    return _result("bh", alpha, names, p, np.asarray(adjusted, dtype=float))


@dataclass(frozen=True)
class FamilyBudget(Result):
    """A per-run false-alarm budget split evenly over a family of tests that each decide on their own
    (Bonferroni: P(any false alarm) <= members * per_test_alpha = budget, whatever their dependence).
    Holm over the family's p-values rejects everything this rejects, and possibly more; the split is
    what a test can apply before the others have run. `unsplit_rate` is the family-wise rate had every
    test run at the whole budget, for independent tests: 1 - (1 - budget)^members."""

    budget: float
    members: int
    per_test_alpha: float
    unsplit_rate: float

    def describe(self) -> str:
        return (f"per-run false-alarm budget {self.budget:g} over {self.members} tests (Bonferroni): each at alpha "
                f"{self.per_test_alpha:.3g}; unsplit, the family would false-alarm in up to {self.unsplit_rate:.2%} of runs")


def family_budget(budget: float, members: int) -> FamilyBudget:
    """Split `budget` over `members` tests (at least one)."""
    check_fraction(budget, "budget")
    if members < 1:
        raise StatsInputError(f"a test family needs at least one member, got {members}")
    return FamilyBudget(budget=float(budget), members=members, per_test_alpha=float(budget) / members,
                        unsplit_rate=float(1.0 - (1.0 - budget) ** members))

