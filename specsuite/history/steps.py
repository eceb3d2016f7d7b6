"""Step detection in a nightly series: binary segmentation with two-sample t-tests (scipy.stats).

Each night contributes one value (its pooled estimate), and the night is the unit: whatever
makes nights differ beyond their own sampling error (warm-up, neighbours on the node, seeds) is
part of the noise the tests see, so they need no model of it.

Binary segmentation, as in E-divisive / Hunter-style change-point detection for performance CI.
In a segment of the series:

1. Steps: every split leaving at least `min_size` nights on each side is a candidate, tested by
   Student's two-sample t-test (pooled variance, p from `scipy.stats.t`) of the nights before
   against the nights after.  Under "nothing changed" the nights are exchangeable, so both sides
   share one variance and the pooled estimate uses every night.
2. Transients: a regression that is fixed a few nights later looks, to a single split, like
   noise on both sides (each side mixes two levels), so every run of at least `min_size` nights
   with at least `min_size` nights on either side is also a candidate: those nights against the
   rest of the segment.  Found, it gives two change points (into the bump and out of it).
3. The best candidate is judged with a weighted Bonferroni correction over everything searched:
   steps get `STEP_SHARE` of alpha (p_adj = p * splits / STEP_SHARE), transients the rest, so the
   chance of any false alarm in a segment stays below alpha while single steps, the common case,
   lose little power.  Below alpha the change points are kept and each new segment is searched
   again; otherwise the segment is flat.

A single noisy night cannot make a step: every level needs `min_size` (default 2) nights, so an
outlier sits beside normal nights and widens their variance instead.  The price is that a step
on the newest night is confirmed only once `min_size` nights show it; tonight alone is judged by
the nightly regression test against the last good run.

Two constant sides (deterministic outputs) give p = 0 if their values differ and 1 if not.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from specsuite.errors import SpecsuiteError
from specsuite.stats.lazy_scipy import stats

DEFAULT_ALPHA = 0.01
DEFAULT_MIN_SIZE = 2
STEP_SHARE = 0.8  # of alpha for single steps; transients get the remaining 0.2
CONSTANT_TOLERANCE = 1e-9


@dataclass(frozen=True)
class ChangePoint:
    """A change of level: the series sits at one level before `index` and another from `index` on."""

    index: int  # first position of the new level
    kind: str  # "step" or "transient" (one of a pair: into a bump, or out of it)
    p_value: float  # the t-test that found it
    p_adjusted: float  # weighted Bonferroni over the candidates searched
    candidates: int  # steps and transients searched in that segment
    statistic: float  # t, new level minus old
    before_mean: float  # the levels on either side in the final segmentation
    after_mean: float
    before_n: int
    after_n: int

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class _Found:
    indices: tuple[int, ...]
    kind: str
    p_value: float
    p_adjusted: float
    candidates: int
    statistic: float


def _t_statistic(before: np.ndarray, after: np.ndarray) -> float:
    """Student's pooled-variance t of after minus before; exact answers (0 or ±inf) for two constant sides."""
    mean_before, mean_after = float(before.mean()), float(after.mean())
    pooled = (np.sum((before - mean_before) ** 2) + np.sum((after - mean_after) ** 2)) / (before.size + after.size - 2)
    # Rounding leaves a spread of a few ulps on "constant" sides; below this they count as constant.
    if math.sqrt(pooled) <= CONSTANT_TOLERANCE * max(abs(mean_before), abs(mean_after)):
        if math.isclose(mean_before, mean_after, rel_tol=CONSTANT_TOLERANCE, abs_tol=0.0):
            return 0.0
        return math.copysign(math.inf, mean_after - mean_before)
    return (mean_after - mean_before) / math.sqrt(pooled * (1.0 / before.size + 1.0 / after.size))


def _two_sided_p(statistics: np.ndarray, dof: np.ndarray) -> np.ndarray:
    return np.minimum(1.0, 2.0 * stats.t.sf(np.abs(statistics), dof))


def split_test(before: np.ndarray, after: np.ndarray) -> tuple[float, float]:
    """(t, two-sided p) of Student's two-sample t-test (as scipy.stats.ttest_ind with equal variances)."""
    statistic = _t_statistic(before, after)
    return statistic, float(_two_sided_p(np.array([statistic]), np.array([before.size + after.size - 2]))[0])


def check_parameters(alpha: float, min_size: int) -> None:
    """Refuse an alpha outside (0, 1) or a minimum segment shorter than two nights."""
    if not 0 < alpha < 1:
        raise SpecsuiteError(f"step-detection alpha must lie strictly between 0 and 1, got {alpha!r}")
    if isinstance(min_size, bool) or not isinstance(min_size, int) or min_size < 2:
        raise SpecsuiteError(f"step-detection min_size must be an integer of at least 2 (a variance needs two nights), got {min_size!r}")


def _check(values: Sequence[float], alpha: float, min_size: int) -> np.ndarray:
    check_parameters(alpha, min_size)
    series = np.asarray(values, dtype=float)
    if series.ndim != 1 or not np.all(np.isfinite(series)):
        raise SpecsuiteError("step detection needs a flat list of finite numbers")
    return series


def _search(series: np.ndarray, start: int, end: int, min_size: int) -> _Found | None:
    """The most significant step or transient in [start, end), with its adjusted p-value."""
    splits = [(k,) for k in range(start + min_size, end - min_size + 1)]
    bumps = [(i, j) for i in range(start + min_size, end - 2 * min_size + 1) for j in range(i + min_size, end - min_size + 1)]
    if not splits:
        return None
    candidates = splits + bumps
    statistics = []
    for indices in candidates:
        if len(indices) == 1:
            statistics.append(_t_statistic(series[start:indices[0]], series[indices[0]:end]))
        else:
            i, j = indices
            statistics.append(_t_statistic(np.concatenate([series[start:i], series[j:end]]), series[i:j]))
    p_values = _two_sided_p(np.array(statistics), np.full(len(candidates), end - start - 2))
    weights = np.array([len(splits) / STEP_SHARE] * len(splits) + [len(bumps) / (1.0 - STEP_SHARE)] * len(bumps))
    adjusted = np.minimum(1.0, p_values * weights)
    # Smallest adjusted p first; among ties (e.g. several p = 0), the largest |t|.
    best = min(range(len(candidates)), key=lambda n: (adjusted[n], -abs(statistics[n])))
    return _Found(candidates[best], "step" if len(candidates[best]) == 1 else "transient", float(p_values[best]), float(adjusted[best]),
                  len(candidates), float(statistics[best]))


def detect_steps(values: Sequence[float], *, alpha: float = DEFAULT_ALPHA, min_size: int = DEFAULT_MIN_SIZE) -> list[ChangePoint]:
    """Change points of `values` (oldest first), in order of position."""
    series = _check(values, alpha, min_size)
    found: dict[int, _Found] = {}
    pending = [(0, series.size)]
    while pending:
        start, end = pending.pop()
        best = _search(series, start, end, min_size)
        if best is None or best.p_adjusted >= alpha:
            continue
        for index in best.indices:
            found[index] = best
        bounds = [start, *best.indices, end]
        pending += list(zip(bounds, bounds[1:], strict=False))
    return _change_points(series, found)


def _change_points(series: np.ndarray, found: dict[int, _Found]) -> list[ChangePoint]:
    bounds = [0, *sorted(found), series.size]
    points = []
    for left, index, right in zip(bounds, bounds[1:], bounds[2:], strict=False):
        how = found[index]
        before, after = series[left:index], series[index:right]
        # A transient's second change point goes back the other way.
        statistic = how.statistic if how.kind == "step" or index == how.indices[0] else -how.statistic
        points.append(ChangePoint(index=index, kind=how.kind, p_value=how.p_value, p_adjusted=how.p_adjusted, candidates=how.candidates,
                                  statistic=statistic, before_mean=float(before.mean()), after_mean=float(after.mean()),
                                  before_n=int(before.size), after_n=int(after.size)))
    return points


def segment_means(values: Sequence[float], change_points: Sequence[ChangePoint]) -> list[tuple[int, int, float]]:
    """(start, end, mean) of each level between change points, for plotting."""
    series = np.asarray(values, dtype=float)
    bounds = [0, *(point.index for point in change_points), series.size]
    return [(a, b, float(series[a:b].mean())) for a, b in zip(bounds, bounds[1:], strict=False) if b > a]
