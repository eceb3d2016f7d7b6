"""The machinery the verdict rules share: a row waiting for its verdict, and the tests more than one family uses.

A family's verdict rule (specsuite/families/) fills a comparison row and returns a `Pending`: the effect on
the verdict's scale with its interval and practical threshold, for Holm across the whole analysis and
then `specsuite.stats.verdict` (specsuite.analysis.verdicts), or a verdict its rule decides by itself
(`ruled`), which stays out of Holm.  Shared here: the exact conditional rate-ratio test (the correctness
rates and the integrity violations), the run-level comparison of two or more repeats per arm (Welch on
log values, TOST, the rank pair: accept length, the bench and `compare_run_values`), and the MDE and
log-spread helpers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from specsuite.compare.metric import Metric
from specsuite.compare.series import CONFIDENCE, CaseRuns, interval, num, rate_series
from specsuite.results.types import ArmCounts, ComparisonRow, Effect, Equivalence, Mde, RankPair
from specsuite.stats import (
    EquivalenceResult,
    StatsInputError,
    hodges_lehmann,
    mann_whitney,
    mde_mean_diff,
    mde_rate_ratio,
    mde_two_proportions,
    rate_ratio_test,
    repeats_needed_for_mde,
    tost_equivalence,
    welch_ttest,
)

POWER = 0.8
BOOTSTRAP_RESAMPLES = 1999
BOOTSTRAP_SEED = 0


@dataclass
class Pending:
    """A comparison row waiting for its Holm-adjusted p-value and verdict (or carrying its rule's verdict)."""

    row: ComparisonRow
    effect: float  # on the verdict's scale (log ratio for rates)
    ci: tuple[float, float]
    threshold: float
    higher_is_better: bool
    equivalence: EquivalenceResult | None = None
    ruled: str | None = None  # a verdict the rule decides without a test (no p-value): kept out of Holm


# A verdict rule's engine: (metric, candidate's runs, baseline's runs, threshold, the row to fill) -> the pending
# verdict, or None when the two arms cannot be compared (a row with an effect but no test reads "inconclusive";
# one without an effect is left out).
Engine = Callable[[Metric, CaseRuns, CaseRuns, float, ComparisonRow], "Pending | None"]


def _log(value: float) -> float:
    return -math.inf if value <= 0 else math.inf if math.isinf(value) else math.log(value)


def log_sd(*samples: Sequence[float]) -> float | None:
    """Pooled within-arm sd of log values (about their coefficient of variation); None without a degree of freedom."""
    logs = [np.log(np.asarray(s, dtype=float)) for s in samples if len(s) >= 2]
    dof = sum(x.size - 1 for x in logs)
    if not dof:
        return None
    return math.sqrt(sum(float(np.sum((x - x.mean()) ** 2)) for x in logs) / dof)


def robust_log_sd(*samples: Sequence[float]) -> float | None:
    """The same spread from the median absolute deviation (1.4826 * MAD of log values about each
    arm's median): what a rank-based comparison sees when a few runs hit a disturbed machine."""
    logs = [np.log(np.asarray(s, dtype=float)) for s in samples if len(s) >= 2]
    if not logs:
        return None
    return float(1.4826 * np.median(np.concatenate([np.abs(x - np.median(x)) for x in logs])))


def relative_mde(sd_log: float | None, n1: int, n2: int, target: float, repeats: bool) -> Mde:
    """MDE at the sample size in hand; with repeats, also the repeats per arm `target` needs."""
    mde = Mde.written(scale="relative", value=None, power=POWER, note=None, sd_log=None if sd_log is None else num(sd_log))
    if not sd_log or min(n1, n2) < 2:
        mde.note = "no variation to scale it by" if not sd_log else "too few values"
        return mde
    mde.value = num(math.expm1(mde_mean_diff(sd_log, n1, n2, alpha=1 - CONFIDENCE, power=POWER)))
    if repeats and target > 0:
        try:
            mde.put("repeats_needed", repeats_needed_for_mde(sd_log, target, alpha=1 - CONFIDENCE, power=POWER))
        except StatsInputError as exc:
            mde.note = str(exc)
    return mde


def pooled(candidate: list[tuple[int, int, float]], baseline: list[tuple[int, int, float]]) -> tuple[int, float, int, float] | None:
    """Events (or successes) and exposure (or trials) of each arm summed over its repeats; None if an arm has none."""
    if not candidate or not baseline:
        return None
    return (sum(s[1] for s in candidate), sum(s[2] for s in candidate), sum(s[1] for s in baseline), sum(s[2] for s in baseline))


def compare_rate(metric: Metric, cand: CaseRuns, base: CaseRuns, threshold: float, row: ComparisonRow) -> Pending | None:
    """Events pooled over repeats, exact conditional rate-ratio test; effect = rate ratio (its log on the verdict's scale)."""
    totals = pooled(rate_series(cand, metric), rate_series(base, metric))
    if totals is None:
        return None
    k1, e1, k2, e2 = totals
    res = rate_ratio_test(k1, e1, k2, e2, confidence=CONFIDENCE)
    row.update(candidate_value=k1 / e1 * metric.rate_scale, baseline_value=k2 / e2 * metric.rate_scale, p_value=res.p_value,
               test="exact conditional rate-ratio test (binomial)",
               effect=Effect.written(name="rate ratio", scale="ratio", value=num(res.rate_ratio),
                                     ci=interval(res.rate_ratio_ci),
                                     difference=num(res.rate_difference * metric.rate_scale),
                                     difference_ci=interval(res.rate_difference_ci, metric.rate_scale)),
               n=ArmCounts.written(candidate=e1, baseline=e2, unit=metric.exposure_unit),
               events=ArmCounts.written(candidate=k1, baseline=k2), mde=_rate_mde(metric, k1, e1, k2, e2))
    if k1 == 0 and k2 == 0:
        effect = 0.0
        row.update(note="no events in either arm")
    elif k1 == 0 or k2 == 0:  # a zero arm: continuity-corrected log ratio, so the direction stays finite
        effect = math.log(((k1 + 0.5) / e1) / ((k2 + 0.5) / e2))
    else:
        effect = math.log(res.rate_ratio)
    # From a zero-event baseline any increase is practically relevant.
    practical = 0.0 if k2 == 0 else math.log1p(threshold)
    return Pending(row, effect, (_log(res.rate_ratio_ci[0]), _log(res.rate_ratio_ci[1])), practical, metric.higher_is_better)


def _rate_mde(metric: Metric, k1: int, e1: float, k2: int, e2: float) -> Mde:
    """Ratio detectable over a non-zero baseline; from zero, the smallest detectable rate."""
    if k2 > 0:
        value = mde_rate_ratio(e1, e2, k2 / e2, alpha=1 - CONFIDENCE, power=POWER)
        return Mde.written(scale="ratio", value=num(value), power=POWER, note=None)
    try:
        value = mde_two_proportions(max(1, round(e1)), max(1, round(e2)), 0.0, alpha=1 - CONFIDENCE, power=POWER)
    except StatsInputError as exc:
        return Mde.written(scale="absolute", value=None, power=POWER, note=str(exc))
    return Mde.written(scale="absolute", value=num(value * metric.rate_scale), power=POWER,
                       note=f"smallest detectable rate ({metric.unit}) over a zero-event baseline")


def equivalence_entry(margin: float, result: EquivalenceResult) -> Equivalence:
    return Equivalence.written(margin=margin, p_value=result.p_value, equivalent=result.equivalent, ci=interval(result.ci))


def welch_pending(a: Sequence[float], b: Sequence[float], threshold: float, row: ComparisonRow, *,
                   higher_is_better: bool, equivalence_margin: float | None) -> Pending | None:
    """Run-level comparison on the log scale; identical constant runs are equal, other constants untestable."""
    row.update(test="Welch t on log run-level values" + (" + TOST" if equivalence_margin else ""))
    try:
        res = welch_ttest(a, b, confidence=CONFIDENCE, relative=True)
    except StatsInputError as exc:
        same = list(a) == list(b)
        row.update(p_value=1.0 if same else None, note=None if same else str(exc),
                   effect=Effect.written(name="relative difference", scale="relative",
                                         value=num(float(np.mean(a)) / float(np.mean(b)) - 1.0), ci=None))
        return Pending(row, 0.0, (0.0, 0.0), threshold, higher_is_better) if same else None
    equivalence = None
    if equivalence_margin:
        equivalence = tost_equivalence(a, b, margin=equivalence_margin, relative=True, alpha=1 - CONFIDENCE)
        row.update(equivalence=equivalence_entry(equivalence_margin, equivalence))
    row.update(p_value=res.p_value, effect=Effect.written(name="ratio of geometric means - 1", scale="relative",
                                                          value=num(res.estimate), ci=interval(res.ci)))
    return Pending(row, res.estimate, res.ci, threshold, higher_is_better, equivalence)


def rank_pair(a: Sequence[float], b: Sequence[float], margin: float) -> RankPair:
    """Mann–Whitney and the Hodges–Lehmann relative shift of run values, with its 95 % and TOST (90 %) intervals.

    A busy machine makes a run slower, never faster, so run values have a long one-sided tail;
    this pair is what one disturbed run cannot swing.  Reported beside Welch, not in the verdict.
    """
    alpha = 1 - CONFIDENCE
    try:
        shift = hodges_lehmann(a, b, confidence=CONFIDENCE, relative=True)
        shift_tost = hodges_lehmann(a, b, confidence=1 - 2 * alpha, relative=True)
        p_value = mann_whitney(a, b).p_value
    except StatsInputError as exc:
        return RankPair.written(test=None, note=str(exc))
    return RankPair.written(test="Mann–Whitney U; Hodges–Lehmann shift of log run values", p_value=p_value,
                            estimate=num(shift.estimate), ci=interval(shift.ci), confidence=shift.achieved_confidence,
                            tost_ci=interval(shift_tost.ci), margin=margin,
                            equivalent=bool(margin) and -margin < shift_tost.ci[0] and shift_tost.ci[1] < margin)


def run_level(a_runs: Sequence[float], b_runs: Sequence[float], threshold: float, row: ComparisonRow, *,
               higher_is_better: bool, target_effect: float | None = None) -> Pending | None:
    """Run values of two or more repeats per arm: Welch on log values + TOST, MDE, repeats needed, rank pair."""
    row.update(mde=relative_mde(log_sd(a_runs, b_runs), len(a_runs), len(b_runs),
                                threshold if target_effect is None else target_effect, repeats=True))
    pending = welch_pending(a_runs, b_runs, threshold, row, higher_is_better=higher_is_better,
                             equivalence_margin=threshold or None)
    row.update(rank=rank_pair(a_runs, b_runs, threshold))
    return pending
