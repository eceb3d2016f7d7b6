"""Two-sample tests of the server under test against a speculation-off reference.

For a few fixed prompts, many samples from each server: the token at each position 2..k+2 (the
positions one verify step produces) is compared with a chi-square homogeneity test per prompt
and position (rare tokens pooled into "other", an early end as its own category). The prompts'
statistics add up per position (independent samples); the positions of one sample are not
independent, so each position gets its own p-value and Holm adjusts across positions.

The log-likelihood calibration compares the target log-likelihood of the same tokens (scored by
the reference with a prefill request) between the two servers: per prompt the difference of the
means, then z = sum of differences / sqrt(sum of their variances). A sampler that favours the
modes both models agree on scores positive, one that favours the draft's odd choices negative.

The tail-mass test (`tail_mass_test`, at a temperature other than 1 with top_p 1) compares, the
same way, how many of each sample's tokens fall outside the reference's top-K: the reference's own
draws are the estimate of the tail's mass at T, which the top-K alone bounds only loosely
(specsuite/families/lossless/tempering.py). A sampler that moves mass between the top-K and the
tail moves that count.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specsuite.errors import SpecsuiteError
from specsuite.stats import holm, mde_two_proportions
from specsuite.stats._common import Result
from specsuite.stats.lazy_scipy import stats

END = -1  # category for "the sample ended before this position"
UNDECIDED = -2  # category for "top_p < 1 and the nucleus edge here lies within the numerics gap" (any token drawn)
MIN_POOLED_COUNT = 10  # expected count >= 5 per cell when both arms have the same size
TARGET_POWER = 0.8


def tokens_at(output_ids: Sequence[int], position: int) -> int:
    """The token at 1-based `position`, or END when the sample is shorter."""
    return output_ids[position - 1] if position <= len(output_ids) else END


@dataclass(frozen=True)
class Table:
    """One chi-square homogeneity table (test arm vs reference) over pooled categories."""

    statistic: float
    dof: int
    categories: int


def homogeneity_table(test_tokens: Sequence[int], reference_tokens: Sequence[int]) -> Table:
    """Chi-square homogeneity of two token samples. Categories with a pooled count below
    MIN_POOLED_COUNT go into "other"; a too-small "other" joins the smallest category. One
    category left means nothing to compare (dof 0)."""
    if not test_tokens or not reference_tokens:
        raise SpecsuiteError("a two-sample table needs samples from both servers")
    test_counts, reference_counts = Counter(test_tokens), Counter(reference_tokens)
    pooled = test_counts + reference_counts
    frequent = [token for token, count in pooled.most_common() if count >= MIN_POOLED_COUNT]
    rows = [[test_counts[t] for t in frequent], [reference_counts[t] for t in frequent]]
    other_test = len(test_tokens) - sum(rows[0])
    other_reference = len(reference_tokens) - sum(rows[1])
    if other_test + other_reference:
        if other_test + other_reference >= MIN_POOLED_COUNT or not frequent:
            rows[0].append(other_test)
            rows[1].append(other_reference)
        else:
            rows[0][-1] += other_test
            rows[1][-1] += other_reference
    if len(rows[0]) < 2:
        return Table(0.0, 0, len(rows[0]))
    statistic, _, dof, _ = stats.chi2_contingency(np.array(rows), correction=False)
    return Table(float(statistic), int(dof), len(rows[0]))


@dataclass(frozen=True)
class HomogeneityResult(Result):
    """Per-position chi-square (summed over prompts), Holm-adjusted across positions."""

    positions: list[int]
    statistics: list[float]
    dofs: list[int]
    p_values: list[float]
    adjusted_p_values: list[float]
    p_value: float  # the smallest adjusted p-value
    alpha: float
    passed: bool
    samples_per_arm: int
    prompts: int
    mde_token_probability: float | None


def homogeneity_test(
    test_samples: Sequence[Sequence[Sequence[int]]],
    reference_samples: Sequence[Sequence[Sequence[int]]],
    positions: Sequence[int],
    alpha: float,
) -> HomogeneityResult:
    """`*_samples[prompt][sample]` are output id lists. Fails when any position's Holm-adjusted
    p-value is below alpha.

    `mde_token_probability`: the smallest change of one token's probability (from 0.5, the
    hardest base) at one position of one prompt detected with 80% power, Bonferroni over all
    prompt-position tables: a conservative statement of the test's reach."""
    if len(test_samples) != len(reference_samples) or not test_samples:
        raise SpecsuiteError("the two-sample test needs the same prompts (at least one) from both servers")
    if not positions:
        raise SpecsuiteError("the two-sample test needs at least one position")
    statistics, dofs, p_values = [], [], []
    for position in positions:
        total, dof = 0.0, 0
        for test, reference in zip(test_samples, reference_samples, strict=False):
            table = homogeneity_table([tokens_at(s, position) for s in test], [tokens_at(s, position) for s in reference])
            total += table.statistic
            dof += table.dof
        statistics.append(total)
        dofs.append(dof)
        p_values.append(float(stats.chi2.sf(total, dof)) if dof else 1.0)
    adjusted = holm(p_values, alpha=alpha)
    smallest_arm = min(min(len(t), len(r)) for t, r in zip(test_samples, reference_samples, strict=False))
    tables = len(positions) * len(test_samples)
    return HomogeneityResult(
        positions=list(positions),
        statistics=statistics,
        dofs=dofs,
        p_values=p_values,
        adjusted_p_values=list(adjusted.adjusted),
        p_value=min(adjusted.adjusted),
        alpha=alpha,
        passed=not any(adjusted.reject),
        samples_per_arm=smallest_arm,
        prompts=len(test_samples),
        mde_token_probability=_mde_or_none(smallest_arm, alpha / tables),
    )


def _mde_or_none(n: int, alpha: float) -> float | None:
    """None when even a certain token could not be told apart at this size."""
    try:
        return mde_two_proportions(n, n, 0.5, alpha=alpha, power=TARGET_POWER)
    except SpecsuiteError:
        return None


@dataclass(frozen=True)
class CalibrationResult(Result):
    """Log-likelihood calibration: z > 0 means the test arm's tokens are likelier under the
    target than the reference's. `mde_nats` is the smallest per-sample shift of the mean
    log-likelihood (the same on every prompt) detected with 80% power."""

    z: float
    p_value: float
    alpha: float
    passed: bool
    mean_difference_nats: float
    mde_nats: float
    prompts: int


@dataclass(frozen=True)
class StratifiedShift:
    """Per prompt the difference of the two arms' means of a per-sample statistic, summed over prompts:
    z = sum of differences / sqrt(sum of their variances) (independent samples; a normal limit per prompt)."""

    z: float
    p_value: float
    mean_difference: float  # per prompt, averaged
    mde: float  # the smallest per-sample shift (the same on every prompt) detected with 80% power, two-sided
    prompts: int
    reference_mean: float


def stratified_shift(test: Sequence[Sequence[float]], reference: Sequence[Sequence[float]], alpha: float, what: str) -> StratifiedShift:
    """`test[prompt][sample]`, `reference[prompt][sample]`; prompts with fewer than two samples in either
    arm are skipped; two-sided z."""
    differences, variances, reference_means = [], [], []
    for test_values, reference_values in zip(test, reference, strict=True):
        a, b = np.asarray(test_values, dtype=float), np.asarray(reference_values, dtype=float)
        if len(a) < 2 or len(b) < 2:
            continue
        differences.append(a.mean() - b.mean())
        variances.append(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
        reference_means.append(b.mean())
    if not differences:
        raise SpecsuiteError(f"the {what} needs at least two samples per prompt from both servers")
    spread = math.sqrt(sum(variances))
    total = sum(differences)
    if spread == 0.0:
        z = 0.0 if total == 0.0 else math.copysign(math.inf, total)
    else:
        z = total / spread
    critical = stats.norm.isf(alpha / 2.0) + stats.norm.ppf(TARGET_POWER)
    return StratifiedShift(z=float(z), p_value=float(2.0 * stats.norm.sf(abs(z))), mean_difference=float(total / len(differences)),
                           mde=float(critical * spread / len(differences)), prompts=len(differences),
                           reference_mean=float(np.mean(reference_means)))


def loglik_calibration(
    test_loglik: Sequence[Sequence[float]], reference_loglik: Sequence[Sequence[float]], alpha: float
) -> CalibrationResult:
    """`*_loglik[prompt][sample]` are each sample's summed target log-probabilities. Prompts with
    fewer than two samples in either arm are skipped; two-sided z test."""
    shift = stratified_shift(test_loglik, reference_loglik, alpha, "log-likelihood calibration")
    return CalibrationResult(
        z=shift.z,
        p_value=shift.p_value,
        alpha=alpha,
        passed=shift.p_value >= alpha,
        mean_difference_nats=shift.mean_difference,
        mde_nats=shift.mde,
        prompts=shift.prompts,
    )


@dataclass(frozen=True)
class TailMassResult(Result):
    """Tokens outside the reference's top-K per sample (positions >= 2), test arm against reference: z > 0
    means the test arm draws the tail more often. `reference_tail_tokens` is the reference's mean per
    sample; `mde_ratio_low`/`mde_ratio_high` the tail-mass ratios (test over reference) detected with 80%
    power, two-sided: a change of the tail's mass by a factor outside them is caught 4 times in 5."""

    z: float
    p_value: float
    alpha: float
    passed: bool
    mean_difference: float
    reference_tail_tokens: float
    mde_tail_tokens: float
    mde_ratio_low: float
    mde_ratio_high: float
    prompts: int


def tail_mass_test(test_tail: Sequence[Sequence[float]], reference_tail: Sequence[Sequence[float]], alpha: float) -> TailMassResult:
    """`*_tail[prompt][sample]`: how many of the sample's tokens at positions >= 2 lie outside the
    reference's top-K."""
    shift = stratified_shift(test_tail, reference_tail, alpha, "tail-mass test")
    base = shift.reference_mean
    relative = shift.mde / base if base > 0 else math.inf
    return TailMassResult(
        z=shift.z, p_value=shift.p_value, alpha=alpha, passed=shift.p_value >= alpha, mean_difference=shift.mean_difference,
        reference_tail_tokens=base, mde_tail_tokens=shift.mde, mde_ratio_low=max(0.0, 1.0 - relative),
        mde_ratio_high=1.0 + relative, prompts=shift.prompts,
    )
