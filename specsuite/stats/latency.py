"""Location comparisons for latency-like samples (TTFT, ITL, E2E): rank tests, shift and median estimates.

The first sample is the arm under test, the second the reference; shifts are first - second,
and relative effects are first / second - 1 (+0.004 means "0.4% slower" for a latency).

Experimental unit: when a benchmark is repeated, the requests of one run share that run's
server state (warm-up, clocks, neighbours), so they are not independent across runs.
Compare run-level summaries (`run_level_medians`), one number per repeat, e.g. with
`welch_ttest(..., relative=True)` or `tost_equivalence`; use the per-request tests here only
within a single run per arm, and read their p-values as "these two runs differ".
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from specsuite.stats._common import Alternative, Result, StatsInputError, check_alternative, check_confidence, check_count, check_sample
from specsuite.stats.lazy_scipy import stats

BootstrapMethod = Literal["percentile", "basic", "BCa"]

# Hodges–Lehmann materialises every pairwise difference; beyond this many (200 MB) it refuses.
MAX_PAIRWISE_DIFFERENCES = 25_000_000
# Below this cost (min(m, n) * m * n) the Mann–Whitney null distribution is computed exactly.
_EXACT_NULL_COST = 20_000_000
# Keeps scipy's vectorised bootstrap near 20M values (160 MB) per batch.
_BOOTSTRAP_BATCH_VALUES = 20_000_000


def run_level_medians(samples_by_run: Sequence[Sequence[float]]) -> list[float]:
    """One median per repeat: the repeat, not the request, is the experimental unit across runs."""
    if len(samples_by_run) == 0:
        raise StatsInputError("run_level_medians needs at least one run")
    return [float(np.median(check_sample(run, f"run {i}"))) for i, run in enumerate(samples_by_run)]


@dataclass(frozen=True)
class MannWhitneyResult(Result):
    """Mann–Whitney U test; prob_superiority = P(A > B) + P(A = B) / 2 = U / (n_a * n_b)."""

    n_a: int
    n_b: int
    u_statistic: float
    prob_superiority: float
    p_value: float
    alternative: Alternative


def mann_whitney(a: Sequence[float], b: Sequence[float], alternative: Alternative = "two-sided") -> MannWhitneyResult:
    """scipy.stats.mannwhitneyu (method="auto"); "greater" means a tends to be larger than b."""
    x, y = check_sample(a, "a"), check_sample(b, "b")
    alternative = check_alternative(alternative)
    res = stats.mannwhitneyu(x, y, alternative=alternative, method="auto")
    return MannWhitneyResult(n_a=int(x.size), n_b=int(y.size), u_statistic=float(res.statistic), prob_superiority=float(res.statistic) / (x.size * y.size),
                             p_value=float(res.pvalue), alternative=alternative)


@dataclass(frozen=True)
class MeanComparison(Result):
    """Welch t comparison of means; with relative=True, of log values (ratio of geometric means - 1)."""

    estimate: float
    ci: tuple[float, float]
    p_value: float
    df: float
    n_a: int
    n_b: int
    relative: bool
    alternative: Alternative
    confidence: float


def welch_ttest(
    a: Sequence[float],
    b: Sequence[float],
    alternative: Alternative = "two-sided",
    confidence: float = 0.95,
    relative: bool = False,
) -> MeanComparison:
    """Welch's t-test (scipy.stats.ttest_ind, equal_var=False) with its interval.

    relative=False: estimate = mean(a) - mean(b). relative=True: the test runs on log values
    and estimate = exp(mean log a - mean log b) - 1, a relative change with an asymmetric
    interval; this is the natural choice for a few run-level medians per arm.
    """
    x, y = welch_inputs(a, b, relative)
    alternative = check_alternative(alternative)
    confidence = check_confidence(confidence)
    res = stats.ttest_ind(x, y, equal_var=False, alternative=alternative)
    ci = res.confidence_interval(confidence_level=confidence)
    to_scale = _log_to_relative if relative else float
    return MeanComparison(estimate=to_scale(float(np.mean(x) - np.mean(y))), ci=(to_scale(float(ci.low)), to_scale(float(ci.high))),
                          p_value=float(res.pvalue), df=float(res.df), n_a=int(x.size), n_b=int(y.size), relative=relative, alternative=alternative,
                          confidence=confidence)


def welch_inputs(a: Sequence[float], b: Sequence[float], relative: bool) -> tuple[np.ndarray, np.ndarray]:
    """Checked samples for a Welch test (logs when relative); both-constant samples are refused."""
    x = check_sample(a, "a", min_size=2, positive=relative)
    y = check_sample(b, "b", min_size=2, positive=relative)
    if relative:
        x, y = np.log(x), np.log(y)
    if np.ptp(x) == 0 and np.ptp(y) == 0:
        raise StatsInputError("both samples are constant: a t-test has no variance to work with")
    return x, y


def _log_to_relative(value: float) -> float:
    return math.expm1(value) if math.isfinite(value) else (math.inf if value > 0 else -1.0)


@dataclass(frozen=True)
class BootstrapResult(Result):
    """A bootstrap interval, with everything needed to reproduce it (seed, resamples, method)."""

    statistic: str
    estimate: float
    ci: tuple[float, float]
    confidence: float
    method: BootstrapMethod
    n_resamples: int
    seed: int
    n_a: int
    n_b: int


def bootstrap_median_diff_ci(a: Sequence[float], b: Sequence[float], confidence: float = 0.95, n_resamples: int = 9999, seed: int = 0,
                             method: BootstrapMethod = "percentile") -> BootstrapResult:
    """Bootstrap interval for median(a) - median(b), resampling each arm independently.

    scipy.stats.bootstrap with numpy's default_rng(seed). The percentile method is the default:
    BCa's jackknife acceleration is erratic for medians of tied (quantised) latencies.
    """
    x, y = check_sample(a, "a", min_size=2), check_sample(b, "b", min_size=2)
    return _bootstrap("median_diff", _median_diff, x, y, confidence, n_resamples, seed, method)


def relative_median_diff_ci(a: Sequence[float], b: Sequence[float], confidence: float = 0.95, n_resamples: int = 9999, seed: int = 0,
                            method: BootstrapMethod = "percentile") -> BootstrapResult:
    """Bootstrap interval for median(a) / median(b) - 1, e.g. +0.004 for "median ITL +0.4%".

    Samples must be positive. Same resampling as bootstrap_median_diff_ci.
    """
    x = check_sample(a, "a", min_size=2, positive=True)
    y = check_sample(b, "b", min_size=2, positive=True)
    return _bootstrap("relative_median_diff", _relative_median_diff, x, y, confidence, n_resamples, seed, method)


def _median_diff(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.median(x, axis=axis) - np.median(y, axis=axis)


def _relative_median_diff(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.median(x, axis=axis) / np.median(y, axis=axis) - 1.0


def _bootstrap(name: str, statistic: Callable[..., np.ndarray], x: np.ndarray, y: np.ndarray, confidence: float, n_resamples: int, seed: int,
               method: BootstrapMethod) -> BootstrapResult:
    confidence = check_confidence(confidence)
    n_resamples = check_count(n_resamples, "n_resamples")
    seed = check_count(seed, "seed")
    if n_resamples < 100:
        raise StatsInputError(f"n_resamples must be at least 100 for a usable interval; got {n_resamples}")
    if method not in ("percentile", "basic", "BCa"):
        raise StatsInputError(f"bootstrap method must be percentile, basic or BCa; got {method!r}")
    # Degenerate data (e.g. constant samples) make BCa undefined; that is reported below as
    # one error line instead of scipy's warnings and a nan interval.
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        res = stats.bootstrap(
            (x, y),
            statistic,
            n_resamples=n_resamples,
            batch=max(1, _BOOTSTRAP_BATCH_VALUES // (x.size + y.size)),
            vectorized=True,
            paired=False,
            confidence_level=confidence,
            method=method,
            rng=np.random.default_rng(seed),
        )
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if math.isnan(low) or math.isnan(high):
        raise StatsInputError(
            f"bootstrap {method} interval for {name} is undefined on these samples (too little variation); "
            "try method='percentile'"
        )
    return BootstrapResult(statistic=name, estimate=float(statistic(x, y)), ci=(low, high), confidence=confidence, method=method, n_resamples=n_resamples,
                           seed=seed, n_a=int(x.size), n_b=int(y.size))


@dataclass(frozen=True)
class ShiftEstimate(Result):
    """Hodges–Lehmann shift of a relative to b with its distribution-free interval.

    achieved_confidence is the interval's actual coverage under the continuous-data null
    (order statistics give a discrete set of levels; the nearest one not below `confidence`
    is used). relative=True: estimate and interval are ratios - 1, computed on log values.
    """

    estimate: float
    ci: tuple[float, float]
    confidence: float
    achieved_confidence: float
    n_a: int
    n_b: int
    relative: bool
    method: Literal["exact", "normal"]


def hodges_lehmann(
    a: Sequence[float], b: Sequence[float], confidence: float = 0.95, relative: bool = False
) -> ShiftEstimate:
    """Hodges–Lehmann shift: the median of all pairwise differences a_i - b_j, with its interval.

    The interval [D_(k), D_(mn+1-k)] (sorted pairwise differences, 1-based) inverts the
    two-sided Mann–Whitney test: k is the largest integer with P(U <= k - 1) <= (1 - confidence)/2
    under H0. The U null distribution is exact (Gaussian-binomial counts) for moderate sizes and
    normal with continuity correction beyond. Ties make it slightly conservative. If the
    samples are too small for any interval at this level, the interval is unbounded.
    relative=True works on log values, so the shift is a ratio (reported as ratio - 1).
    """
    x = check_sample(a, "a", positive=relative)
    y = check_sample(b, "b", positive=relative)
    confidence = check_confidence(confidence)
    m, n = int(x.size), int(y.size)
    if m * n > MAX_PAIRWISE_DIFFERENCES:
        raise StatsInputError(
            f"hodges_lehmann on {m} x {n} samples needs {m * n:,} pairwise differences "
            f"(limit {MAX_PAIRWISE_DIFFERENCES:,}); compare run-level medians or subsample"
        )
    if relative:
        x, y = np.log(x), np.log(y)
    k, achieved, method = _order_statistic_rank(m, n, confidence)
    diffs = np.subtract.outer(x, y).ravel()
    total = diffs.size
    middle = sorted({(total - 1) // 2, total // 2})
    wanted = sorted(set(middle) | ({k - 1, total - k} if k >= 1 else set()))
    part = np.partition(diffs, wanted)
    estimate = float(np.mean(part[middle]))
    ci = (float(part[k - 1]), float(part[total - k])) if k >= 1 else (-math.inf, math.inf)
    if relative:
        estimate, ci = _log_to_relative(estimate), (_log_to_relative(ci[0]), _log_to_relative(ci[1]))
    return ShiftEstimate(estimate=estimate, ci=ci, confidence=confidence, achieved_confidence=achieved, n_a=m, n_b=n, relative=relative, method=method)


@functools.lru_cache(maxsize=256)
def _order_statistic_rank(m: int, n: int, confidence: float) -> tuple[int, float, Literal["exact", "normal"]]:
    """(k, achieved confidence, method) for the Hodges–Lehmann interval; k = 0 means unbounded."""
    tail = (1.0 - confidence) / 2.0
    if min(m, n) * m * n <= _EXACT_NULL_COST:
        cdf = _mann_whitney_null_cdf(m, n)
        # cdf[u] = P(U <= u); a relative tolerance keeps exact ties at the tail level inside.
        k = int(np.searchsorted(cdf, tail * (1.0 + 1e-9), side="right"))
        achieved = 1.0 if k == 0 else 1.0 - 2.0 * float(cdf[k - 1])
        return k, achieved, "exact"
    mean, sd = m * n / 2.0, math.sqrt(m * n * (m + n + 1) / 12.0)
    z = float(stats.norm.ppf(1.0 - tail))
    k = max(0, math.floor(mean - z * sd + 0.5))
    achieved = 1.0 if k == 0 else 1.0 - 2.0 * float(stats.norm.cdf((k - 0.5 - mean) / sd))
    return k, achieved, "normal"


def _mann_whitney_null_cdf(m: int, n: int) -> np.ndarray:
    """P(U <= u) for u = 0..m*n under H0 without ties.

    The counts of U are the coefficients of the Gaussian binomial [m+n choose m]_q
    = prod_{i=1..s} (1 - q^(l+i)) / (1 - q^i) with s = min(m, n), l = max(m, n); computed as
    truncated power series, where dividing by (1 - q^i) is a running sum with stride i.
    """
    small, large = min(m, n), max(m, n)
    size = small * large + 1
    coeffs = np.zeros(size)
    coeffs[0] = 1.0
    for i in range(1, small + 1):
        step = large + i
        if step < size:
            coeffs[step:] = coeffs[step:] - coeffs[:-step]
        padded = np.zeros(-(-size // i) * i)
        padded[:size] = coeffs
        coeffs = np.cumsum(padded.reshape(-1, i), axis=0).ravel()[:size]
    cdf = np.cumsum(coeffs)
    return cdf / cdf[-1]
