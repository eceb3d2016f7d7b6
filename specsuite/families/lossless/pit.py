"""Calibration test: a randomized probability integral transform (PIT) of each generated token
under the target's distribution, tested for uniformity.

Order the target's top-K by probability (ties by id) and put everything else in one tail bucket
after them. A token x with cumulative mass F(x-) before it and probability p(x) maps to
u = F(x-) + V * p(x), V ~ U(0, 1) drawn here; a token outside the top-K maps to S_K + V * (1 - S_K).
If the server samples exactly from the target, u is U(0, 1) given everything before it, so the
u of all positions (also positions of one sequence) are iid uniform. A sampler that leans toward
the draft, the target's mode or its unlikely tokens piles u up somewhere; KS and a binned
chi-square look for that (Bonferroni-combined).

top_p < 1: the sampler draws from the nucleus renormalised, so u is computed within the nucleus.
A position whose nucleus is not decided by the top-K (it may reach past it, or ties straddle its
edge) is skipped; that choice depends on the context only, so the kept u stay uniform. "Decided"
allows for the served numerics: the sampler's logits come from another forward than the scoring
request's (a decode or a verify step against a prefill), so each may differ by half the served
dtype's near-tie gap g (specsuite.families.lossless.greedy.near_tie_of: float32 1e-3 nats,
bfloat16 0.25), g / T after tempering. A prefix mass S then reads anywhere in
[S / (S + (1 - S) e^g), S e^g / (S e^g + 1 - S)], and two neighbours closer than g may swap; a
position where either could move the nucleus's edge is skipped (`nucleus_size`). A drawn token
outside a decided nucleus is impossible for a correct sampler: it is counted, and enters the test
as u = 1, the most extreme value, so that many of them fail the test while a rare one does not.

Temperature: the scoring request returns raw logprobs (temperature 1); the target at T is
p^(1/T) renormalised (specsuite/families/lossless/tempering.py). The top-K's weights are exact, the
tail's only within bounds. At T = 1 the tail is exact and the PIT above applies. At T != 1 with
top_p 1 the PIT is taken given that the token is in the top-K (exact: the top-K's weights
renormalised); given the context, the event "the token is in the top-K" is the only selection, so
the kept u are still iid uniform. The tail tokens themselves go to a count test against the tail
mass's bounds (`tail_rate_test`). A nucleus inside the top-K needs no tail weight, only its size
does: a position whose size depends on where in its bounds the tail lies is skipped.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from specsuite.errors import SpecsuiteError
from specsuite.families.lossless.tempering import TemperedPosition
from specsuite.stats._common import Result
from specsuite.stats.lazy_scipy import optimize, stats

# Summation order alone moves a prefix sum by far less than this, whatever the logits' type.
NUCLEUS_TOLERANCE = 1e-4
FLOAT32_GAP = 1e-3  # the near-tie gap of float32 logits (greedy.DEFAULT_NUMERICS_GAP); callers pass the served one
BODY_BINS = 10
MAX_TAIL_SPLITS = 12
MIN_EXPECTED_PER_BIN = 5
MIN_VALUES = 20
TARGET_POWER = 0.8

PitStatus = Literal["ok", "unresolved", "outside-support", "tail"]


@dataclass(frozen=True)
class PitValue:
    """The PIT of one position: in [0, 1]; 1.0 for a token outside the nucleus; None when unresolved, or
    for a tail token where only the top-K's distribution is exact ("tail")."""

    value: float | None
    status: PitStatus


def _nucleus_size(position: TemperedPosition, top_p: float, gap: float) -> int | None:
    """How many of the sorted top-K the sampler keeps (prefix mass before a token < top_p), or None
    when the top-K cannot decide it: the nucleus may reach past the top-K, a prefix mass could read on
    either side of top_p or the last kept token swap with the first dropped one under the numerics
    `gap` (nats, at the sampling temperature), or the answer depends on where in its bounds the
    tail's weight lies (a temperature other than 1)."""
    sizes = {nucleus_size(position.top_weights / (position.top_weight + tail), top_p, gap)
             for tail in (position.tail_low, position.tail_high)}
    return sizes.pop() if len(sizes) == 1 else None


def nucleus_decided(position: TemperedPosition, top_p: float, gap: float) -> bool:
    """Whether the top-K places the nucleus edge at this position beyond the numerics `gap` (always at top_p 1)."""
    return top_p >= 1.0 or _nucleus_size(position, top_p, gap) is not None


def _prefix_band(mass: np.ndarray, gap: float) -> tuple[np.ndarray, np.ndarray]:
    """Where a prefix mass S can read when every logit may move by gap / 2: its log-odds move by up to
    gap; widened by NUCLEUS_TOLERANCE for summation order."""
    stretch = math.exp(gap)
    low = mass / (mass + (1.0 - mass) * stretch)
    high = mass * stretch / (mass * stretch + (1.0 - mass))
    return low - NUCLEUS_TOLERANCE, high + NUCLEUS_TOLERANCE


def nucleus_size(probs: np.ndarray, top_p: float, gap: float = FLOAT32_GAP) -> int | None:
    """The nucleus size over `probs` (sorted, most likely first, a share of the whole vocabulary), or
    None when logits that differ by up to `gap` nats between two forwards could make it another."""
    before = np.clip(np.cumsum(probs) - probs, 0.0, 1.0)
    kept = int(np.count_nonzero(before < top_p))
    low, high = _prefix_band(before, gap)
    if np.any((low < top_p) & (high >= top_p)):
        return None
    if kept == len(probs):
        total = float(min(1.0, probs.sum()))
        return None if _prefix_band(np.array([total]), gap)[0][0] < top_p else kept
    if probs[kept] > 0 and math.log(probs[kept - 1] / probs[kept]) <= gap:
        return None  # the last kept and the first dropped token could swap
    return kept


def randomized_pit(position: TemperedPosition, uniform: float, top_p: float = 1.0, gap: float = FLOAT32_GAP) -> PitValue:
    """The randomized PIT of `position.token_id`; `uniform` is the V ~ U(0, 1) for this position; `gap`
    the numerics gap in nats at the sampling temperature (see the module docstring)."""
    weights, rank = position.top_weights, position.rank
    if top_p < 1.0:
        kept = _nucleus_size(position, top_p, gap)
        if kept is None:
            return PitValue(None, "unresolved")
        if rank is None or rank >= kept:
            return PitValue(1.0, "outside-support")
        return PitValue(_within(weights[:kept], rank, uniform), "ok")
    if not position.exact:
        # Given that the token is in the top-K its distribution is exact; a tail token is counted for
        # the tail-rate test instead.
        return PitValue(None, "tail") if rank is None else PitValue(_within(weights, rank, uniform), "ok")
    top, tail = position.top_weight, position.tail_low
    if rank is None:
        return PitValue(min(1.0, (top + uniform * tail) / (top + tail)), "ok")
    return PitValue(min(1.0, (float(weights[:rank].sum()) + uniform * float(weights[rank])) / (top + tail)), "ok")


def _within(weights: np.ndarray, rank: int, uniform: float) -> float:
    """The PIT of the id at `rank` under `weights` renormalised."""
    return min(1.0, (float(weights[:rank].sum()) + uniform * float(weights[rank])) / float(weights.sum()))


@dataclass(frozen=True)
class PitValues:
    """The PIT values of many positions (outside-support ones included, as 1.0), the counts of
    outside-support and unresolved (skipped) positions, and for positions tested given the top-K
    (temperature other than 1, top_p 1) how many drew a tail token against the tail mass expected."""

    values: np.ndarray
    unresolved: int
    outside_support: int
    tail_positions: int = 0
    tail_draws: int = 0
    tail_expected_low: float = 0.0
    tail_expected_high: float = 0.0

    @property
    def positions(self) -> int:
        return len(self.values) + self.unresolved + self.tail_draws


def pit_values(positions: Iterable[TemperedPosition], top_p: float, seed: int, gap: float = FLOAT32_GAP) -> PitValues:
    """PIT of every position, with one V per position from a generator seeded with `seed`; `gap` is the
    served numerics' near-tie gap at the sampling temperature (nats)."""
    rng = np.random.default_rng(seed)
    values: list[float] = []
    unresolved = outside = tail_positions = tail_draws = 0
    expected_low = expected_high = 0.0
    for position in positions:
        result = randomized_pit(position, float(rng.random()), top_p, gap)
        if top_p >= 1.0 and not position.exact:
            low, high = position.tail_mass_bounds()
            tail_positions += 1
            expected_low, expected_high = expected_low + low, expected_high + high
            tail_draws += result.status == "tail"
        if result.value is None:
            unresolved += result.status == "unresolved"
            continue
        values.append(result.value)
        outside += result.status == "outside-support"
    return PitValues(np.array(values, dtype=np.float64), unresolved, outside, tail_positions, tail_draws, expected_low, expected_high)


@dataclass(frozen=True)
class TailRateResult(Result):
    """Tail tokens drawn at positions tested given the top-K, against the tail mass the target gives
    them, known only within bounds (specsuite/families/lossless/tempering.py). One-sided Poisson
    p-values on each side, at the bound that favours the server: the count of a sum of independent
    Bernoulli draws has tails no heavier than a Poisson's of the same mean one unit or more from it
    (Hoeffding 1956; Anderson and Samuels 1967), so both are conservative. Bonferroni over the sides."""

    positions: int
    draws: int
    expected_low: float
    expected_high: float
    p_excess: float
    p_deficit: float
    p_value: float
    alpha: float
    passed: bool


def tail_rate_test(values: PitValues, alpha: float) -> TailRateResult:
    """Are tail tokens drawn more often than the target's largest possible tail mass allows, or less
    often than its smallest?"""
    draws, low, high = values.tail_draws, values.tail_expected_low, values.tail_expected_high
    p_excess = float(stats.poisson.sf(draws - 1, high)) if high > 0 and draws >= high + 1 else 1.0
    if draws > 0 and high == 0:
        p_excess = 0.0  # a tail token where the target has no tail
    p_deficit = float(stats.poisson.cdf(draws, low)) if draws <= low - 1 else 1.0
    p_value = min(1.0, 2.0 * min(p_excess, p_deficit))
    return TailRateResult(positions=values.tail_positions, draws=draws, expected_low=low, expected_high=high,
                          p_excess=p_excess, p_deficit=p_deficit, p_value=p_value, alpha=alpha, passed=p_value >= alpha)


# -- bins and power ---------------------------------------------------------------------------


def pit_bin_edges(n: int) -> np.ndarray:
    """Bin edges for n PIT values: 0.1-wide bins up to 0.9, then bins that halve toward 1 while a
    bin still expects MIN_EXPECTED_PER_BIN values. The fine top bins hold the target's unlikely
    tokens and its tail bucket, where a sampler leaning toward the draft's choices puts excess
    mass that a KS test cannot see."""
    if n < MIN_VALUES:
        raise SpecsuiteError(f"the PIT test needs at least {MIN_VALUES} values, got {n}: raise the sample size")
    body = int(min(BODY_BINS, n // MIN_EXPECTED_PER_BIN))
    if body < BODY_BINS:
        return np.linspace(0.0, 1.0, max(2, body) + 1)
    edges = [index / BODY_BINS for index in range(BODY_BINS)]
    width = 1.0 / BODY_BINS
    while width / 2 * n >= MIN_EXPECTED_PER_BIN and len(edges) < BODY_BINS + MAX_TAIL_SPLITS:
        width /= 2
        edges.append(1.0 - width)
    edges.append(1.0)
    return np.array(edges)


@functools.lru_cache(maxsize=64)
def _noncentrality_for_power(dof: int, alpha: float, power: float) -> float:
    critical = stats.chi2.isf(alpha, dof)
    return float(optimize.brentq(lambda lam: stats.ncx2.sf(critical, dof, lam) - power, 1e-9, 1e7))


def chi_square_power(n: int, bin_probability: float, bins: int, epsilon: float, alpha: float) -> float:
    """Power of the chi-square over `bins` bins when an excess `epsilon` of the PIT mass (its
    total-variation distance from uniform) lands in one bin of null probability `bin_probability`,
    taken from the others in proportion: noncentrality n * epsilon^2 / (pi * (1 - pi))."""
    dof = bins - 1
    noncentrality = n * epsilon**2 / (bin_probability * (1.0 - bin_probability))
    return float(stats.ncx2.sf(stats.chi2.isf(alpha, dof), dof, noncentrality))


def chi_square_mde(n: int, bin_probability: float, bins: int, alpha: float, power: float = TARGET_POWER) -> float:
    """Smallest one-bin excess (total variation) the chi-square detects with `power` at `alpha`."""
    noncentrality = _noncentrality_for_power(bins - 1, alpha, power)
    return math.sqrt(noncentrality * bin_probability * (1.0 - bin_probability) / n)


def pit_values_needed(epsilon: float, bin_probability: float, bins: int, alpha: float, power: float = TARGET_POWER) -> int:
    """PIT values needed to detect a one-bin excess `epsilon` with `power` (inverse of chi_square_mde)."""
    if not 0.0 < epsilon < 1.0:
        raise SpecsuiteError(f"epsilon must be in (0, 1), got {epsilon}")
    noncentrality = _noncentrality_for_power(bins - 1, alpha, power)
    return math.ceil(noncentrality * bin_probability * (1.0 - bin_probability) / epsilon**2)


# -- the test ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UniformityResult(Result):
    """KS and binned chi-square of PIT values against U(0, 1), combined by Bonferroni (each at
    alpha / 2; passed when p_value >= alpha).

    Power, at this n and alpha / 2, for the chi-square part: `mde_tv_body` is the smallest
    total-variation distance between the emitted and the target per-position distributions
    (as seen through the PIT) detected with 80% power when the excess falls in one 0.1-wide bin
    (e.g. a sampler favouring the mode); `mde_tv_tail` the same for the narrowest top bin (a
    sampler favouring tokens the target finds unlikely). `ks_critical_distance` is the smallest
    sup-distance between the PIT's CDF and the uniform one that the KS part flags.
    """

    n: int
    alpha: float
    ks_statistic: float
    ks_p: float
    chi2_statistic: float
    chi2_p: float
    p_value: float
    passed: bool
    bin_edges: list[float]
    bin_counts: list[int]
    expected_counts: list[float]
    mean: float
    mde_tv_body: float
    mde_tv_tail: float
    ks_critical_distance: float


def uniformity_test(values: Sequence[float] | np.ndarray, alpha: float) -> UniformityResult:
    """Test PIT values for uniformity with KS and the chi-square over `pit_bin_edges`."""
    u = np.asarray(values, dtype=np.float64)
    if u.ndim != 1:
        raise SpecsuiteError("PIT values must be a flat list")
    if not np.all((u >= 0.0) & (u <= 1.0)):
        raise SpecsuiteError("PIT values must lie in [0, 1]")
    if not 0.0 < alpha < 1.0:
        raise SpecsuiteError(f"alpha must be in (0, 1), got {alpha}")
    edges = pit_bin_edges(len(u))
    counts = np.histogram(u, bins=edges)[0]
    probabilities = np.diff(edges)
    expected = probabilities * len(u)
    chi2_statistic, chi2_p = stats.chisquare(counts, expected)
    ks = stats.kstest(u, "uniform")
    p_value = min(1.0, 2.0 * min(float(ks.pvalue), float(chi2_p)))
    half = alpha / 2.0
    bins = len(counts)
    return UniformityResult(
        n=len(u),
        alpha=alpha,
        ks_statistic=float(ks.statistic),
        ks_p=float(ks.pvalue),
        chi2_statistic=float(chi2_statistic),
        chi2_p=float(chi2_p),
        p_value=p_value,
        passed=p_value >= alpha,
        bin_edges=[float(e) for e in edges],
        bin_counts=[int(c) for c in counts],
        expected_counts=[float(e) for e in expected],
        mean=float(u.mean()),
        mde_tv_body=chi_square_mde(len(u), float(probabilities.max()), bins, half),
        mde_tv_tail=chi_square_mde(len(u), float(probabilities.min()), bins, half),
        ks_critical_distance=float(stats.kstwo.isf(half, len(u))),
    )


@dataclass(frozen=True)
class PitDecision:
    """The PIT's verdict at one setting: the uniformity test and, where positions were tested given the
    top-K, the tail-rate test beside it (Bonferroni over the two)."""

    uniformity: UniformityResult
    tail: TailRateResult | None
    p_value: float
    alpha: float

    @property
    def passed(self) -> bool:
        return self.p_value >= self.alpha


def pit_decision(values: PitValues, alpha: float) -> PitDecision:
    """Test the PIT values (and the tail count where it applies) at `alpha` for the pair."""
    split = 2 if values.tail_positions else 1
    uniformity = uniformity_test(values.values, alpha / split)
    tail = tail_rate_test(values, alpha / split) if values.tail_positions else None
    p_value = min(1.0, split * min(uniformity.p_value, 1.0 if tail is None else tail.p_value))
    return PitDecision(uniformity, tail, p_value, alpha)

