"""A/B verdicts: every candidate arm of a merged results dict against the baseline arm.

`compare_arms(results)` reads the merged `results.json` shape (`arms.<name>.repeats[].cases` and
`.workloads`) and returns the typed `Comparison` (harness.results.types), JSON-ready through its
``to_dict()`` (non-finite numbers become None):

- `comparisons`: one row per (metric, sampling case, candidate) with both arms' values, the
  effect with its 95 % interval, the raw and Holm-adjusted p-value (Holm over every row that has
  a p-value), the minimum detectable effect at the sample size in hand, and a verdict;
- `estimates`: per (arm, case, metric) the pooled value with its 95 % interval (what the report's
  before/after tables show), and `repeat_spread`: one value per repeat with min/max/mean/sd
  (both from harness.compare.metrics);
- `metrics`, `report_rows`, `spread_rows`: the metric registry's facts (labels, units,
  directions, thresholds, tests, report rows) for the report, which does not import the harness.

Each metric's test is its registry `statistic` (harness.compare.metric_registry):

- `rate_ratio` (the event rates): events pooled over repeats, exact conditional rate-ratio test;
  effect = rate ratio.
- `accept_shift` (`accept_length`): one repeat per arm: Mann–Whitney on the per-request values
  with the Hodges–Lehmann relative shift; two or more: the repeat is the experimental unit, so
  Welch's t on log run-level medians (effect = ratio of geometric means - 1).
- `mcnemar` (`gsm8k_accuracy`): exact McNemar on questions paired by index within the same repeat
  number.  `fisher` (`gsm8k_invalid`): Fisher's exact test; effect = risk difference.
- `run_level` (`itl_median`, `output_throughput`): two or more repeats per arm: Welch's t on log
  run-level values, TOST within the practical threshold for "equivalent", and beside them the
  rank-based pair one disturbed run cannot swing (Mann–Whitney, Hodges–Lehmann shift of log
  values; `row.rank`, not used by the verdict); one run with per-token ITLs: bootstrap interval
  of the relative median difference, Mann–Whitney p-value.  `compare_run_values` is the same
  engine for run values outside a results dict (the calibration scripts).

Verdicts (asv style, `harness.stats.verdict`): "worse"/"better" need a Holm-adjusted p below
alpha AND an effect past the practical threshold (the registry's, overridable per metric).  For
rates the threshold is on the rate ratio, except that from a zero-event baseline any increase
counts (and a drop to zero from a non-zero baseline is a full drop).  GSM8K thresholds are in
absolute proportion (0.02 = 2 points), the rest relative (0.02 = 2 %).  One more verdict,
"suspect": an accept-length row that would be "better" for a candidate arm that is "worse", in
any case, on a corruption sign (invalid, fallback or padded-row ids, stray rate, sampler
fallbacks) is the founding bug's signature, not a speed-up (`_mark_suspect`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.compare.metric_registry import (
    BY_NAME,
    GSM8K_DEFINITION,
    METRICS,
    SUSPECT_NOTE,
    Metric,
    default_thresholds,
    metric_table,
)
from harness.compare.metrics import (
    CONFIDENCE,
    CaseRuns,
    arm_roles,
    estimates,
    gather_arm,
    interval,
    num,
    per_request_series,
    per_token_values,
    proportion_series,
    rate_series,
    repeat_spread,
    run_values,
    sorted_cases,
)
from harness.errors import SpecsuiteError
from harness.results.types import (
    ArmCounts,
    Comparison,
    ComparisonRow,
    Document,
    Effect,
    Equivalence,
    Mde,
    MetricFacts,
    RankPair,
)
from harness.stats import (
    EquivalenceResult,
    StatsInputError,
    fisher_exact_2x2,
    hodges_lehmann,
    holm,
    mann_whitney,
    mcnemar_from_pairs,
    mde_mean_diff,
    mde_rate_ratio,
    mde_two_proportions,
    rate_ratio_test,
    relative_median_diff_ci,
    repeats_needed_for_mde,
    run_level_medians,
    tost_equivalence,
    verdict,
    welch_ttest,
)
from harness.workloads.gsm8k.runner import paired_outcomes

POWER = 0.8
BOOTSTRAP_RESAMPLES = 1999
BOOTSTRAP_SEED = 0

DEFAULT_THRESHOLDS = default_thresholds()
SUSPECT = "suspect"


@dataclass
class Pending:
    """A comparison row waiting for its Holm-adjusted p-value and verdict."""

    row: ComparisonRow
    effect: float  # on the verdict's scale (log ratio for rates)
    ci: tuple[float, float]
    threshold: float
    higher_is_better: bool
    equivalence: EquivalenceResult | None = None


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


def _relative_mde(sd_log: float | None, n1: int, n2: int, target: float, repeats: bool) -> Mde:
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


def _base_row(name: str, case_id: str, candidate: str, baseline: str, runs: CaseRuns) -> ComparisonRow:
    metric = BY_NAME[name]
    return ComparisonRow.written(metric=name, label=metric.label, case_id=case_id, temperature=runs.temperature,
                                 top_p=runs.top_p, candidate=candidate, baseline=baseline, unit=metric.unit,
                                 candidate_value=None, baseline_value=None, effect=None, p_value=None, mde=None,
                                 test=None, n=None, higher_is_better=metric.higher_is_better, note=None)


def _pooled(candidate: list[tuple[int, int, float]], baseline: list[tuple[int, int, float]]) -> tuple[int, float, int, float] | None:
    """Events (or successes) and exposure (or trials) of each arm summed over its repeats; None if an arm has none."""
    if not candidate or not baseline:
        return None
    return (sum(s[1] for s in candidate), sum(s[2] for s in candidate), sum(s[1] for s in baseline), sum(s[2] for s in baseline))


def _compare_rate(metric: Metric, cand: CaseRuns, base: CaseRuns, threshold: float, row: ComparisonRow) -> Pending | None:
    pooled = _pooled(rate_series(cand, metric), rate_series(base, metric))
    if pooled is None:
        return None
    k1, e1, k2, e2 = pooled
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


def _compare_accept(metric: Metric, cand: CaseRuns, base: CaseRuns, threshold: float, row: ComparisonRow) -> Pending | None:
    c_series, b_series = per_request_series(cand, metric), per_request_series(base, metric)
    if not c_series or not b_series:
        return None
    if len(c_series) >= 2 and len(b_series) >= 2:
        a, b = run_level_medians([v for _, v in c_series]), run_level_medians([v for _, v in b_series])
        row.update(candidate_value=float(np.median(a)), baseline_value=float(np.median(b)), value_statistic="median of run medians",
                   n=ArmCounts.written(candidate=len(a), baseline=len(b), unit="repeats"),
                   mde=_relative_mde(log_sd(a, b), len(a), len(b), threshold, repeats=True))
        return _welch_pending(a, b, threshold, row, higher_is_better=metric.higher_is_better, equivalence_margin=None)
    a = np.concatenate([v for _, v in c_series])
    b = np.concatenate([v for _, v in b_series])
    shift = hodges_lehmann(a, b, confidence=CONFIDENCE, relative=True)
    # The values a rank test compares are medians; the report's per-case tables show means of requests, and say so.
    row.update(candidate_value=float(np.median(a)), baseline_value=float(np.median(b)), value_statistic="median of requests",
               p_value=mann_whitney(a, b).p_value, test="Mann–Whitney U; Hodges–Lehmann relative shift",
               effect=Effect.written(name="Hodges–Lehmann shift (relative)", scale="relative", value=num(shift.estimate),
                                     ci=interval(shift.ci)),
               n=ArmCounts.written(candidate=int(a.size), baseline=int(b.size), unit="requests"),
               mde=_relative_mde(log_sd(a, b), int(a.size), int(b.size), threshold, repeats=False))
    return Pending(row, shift.estimate, shift.ci, threshold, metric.higher_is_better)


def _equivalence_entry(margin: float, result: EquivalenceResult) -> Equivalence:
    return Equivalence.written(margin=margin, p_value=result.p_value, equivalent=result.equivalent, ci=interval(result.ci))


def _welch_pending(a: Sequence[float], b: Sequence[float], threshold: float, row: ComparisonRow, *,
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
        row.update(equivalence=_equivalence_entry(equivalence_margin, equivalence))
    row.update(p_value=res.p_value, effect=Effect.written(name="ratio of geometric means - 1", scale="relative",
                                                          value=num(res.estimate), ci=interval(res.ci)))
    return Pending(row, res.estimate, res.ci, threshold, higher_is_better, equivalence)


def _compare_paired_questions(metric: Metric, cand: CaseRuns, base: CaseRuns, threshold: float, row: ComparisonRow) -> Pending | None:
    a_all: list[bool] = []
    b_all: list[bool] = []
    base_runs = dict(base.runs)
    for number, run in cand.runs:
        other = base_runs.get(number)
        if other is not None and run.has("per_question") and other.has("per_question"):
            try:  # paired_outcomes reads the runs' per-question tables only
                pairs = paired_outcomes({"per_question": run.per_question}, {"per_question": other.per_question}, GSM8K_DEFINITION)
            except SpecsuiteError as exc:  # different shots or data: that repeat cannot be paired
                row.update(note=f"repeat {number} not paired: {exc}")
                continue
            a_all += pairs.a
            b_all += pairs.b
    if not a_all:
        return None
    res = mcnemar_from_pairs(a_all, b_all, confidence=CONFIDENCE)
    p_base = float(np.mean(b_all))
    row.update(candidate_value=float(np.mean(a_all)), baseline_value=p_base, p_value=res.p_value,
               test="exact McNemar (paired by question)",
               effect=Effect.written(name="accuracy difference", scale="difference", value=res.difference,
                                     ci=interval(res.difference_ci)),
               n=ArmCounts.written(candidate=res.n_pairs, baseline=res.n_pairs, unit="paired questions"),
               events=ArmCounts.written(candidate=res.a_only, baseline=res.b_only, unit="discordant pairs"),
               mde=_proportion_mde(res.n_pairs, res.n_pairs, min(p_base, 1.0 - p_base),
                                   "accuracy drop detectable (unpaired approximation, conservative)"))
    return Pending(row, res.difference, res.difference_ci, threshold, metric.higher_is_better)


def _proportion_mde(n1: int, n2: int, p_base: float, note: str) -> Mde:
    # The arcsine scale is symmetric, so a drop from p equals a rise from 1 - p.
    try:
        value = mde_two_proportions(n1, n2, p_base, alpha=1 - CONFIDENCE, power=POWER)
    except StatsInputError as exc:
        return Mde.written(scale="difference", value=None, power=POWER, note=str(exc))
    return Mde.written(scale="difference", value=num(value), power=POWER, note=note)


def _compare_proportions(metric: Metric, cand: CaseRuns, base: CaseRuns, threshold: float, row: ComparisonRow) -> Pending | None:
    pooled = _pooled(proportion_series(cand, metric), proportion_series(base, metric))
    if pooled is None:
        return None
    k1, n1, k2, n2 = (int(v) for v in pooled)
    res = fisher_exact_2x2(k1, n1, k2, n2, confidence=CONFIDENCE, odds_ratio_ci=False)
    row.update(candidate_value=k1 / n1, baseline_value=k2 / n2, p_value=res.p_value, test="Fisher's exact test",
               effect=Effect.written(name="risk difference", scale="difference", value=res.risk_difference,
                                     ci=interval(res.risk_difference_ci)),
               n=ArmCounts.written(candidate=n1, baseline=n2, unit="answered questions"),
               events=ArmCounts.written(candidate=k1, baseline=k2),
               mde=_proportion_mde(n1, n2, k2 / n2, "smallest detectable rise in the invalid rate"))
    return Pending(row, res.risk_difference, res.risk_difference_ci, 0.0 if k2 == 0 else threshold, metric.higher_is_better)


def _rank_pair(a: Sequence[float], b: Sequence[float], margin: float) -> RankPair:
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


def _run_level(a_runs: Sequence[float], b_runs: Sequence[float], threshold: float, row: ComparisonRow, *,
               higher_is_better: bool, target_effect: float | None = None) -> Pending | None:
    """Run values of two or more repeats per arm: Welch on log values + TOST, MDE, repeats needed, rank pair."""
    row.update(mde=_relative_mde(log_sd(a_runs, b_runs), len(a_runs), len(b_runs),
                                threshold if target_effect is None else target_effect, repeats=True))
    pending = _welch_pending(a_runs, b_runs, threshold, row, higher_is_better=higher_is_better,
                             equivalence_margin=threshold or None)
    row.update(rank=_rank_pair(a_runs, b_runs, threshold))
    return pending


def _compare_bench(metric: Metric, cand: CaseRuns, base: CaseRuns, threshold: float, row: ComparisonRow) -> Pending | None:
    a_runs, b_runs = [v for _, v in run_values(cand, metric.name)], [v for _, v in run_values(base, metric.name)]
    if not a_runs or not b_runs:
        return None
    higher_is_better = metric.higher_is_better
    row.update(candidate_value=float(np.median(a_runs)), baseline_value=float(np.median(b_runs)),
               n=ArmCounts.written(candidate=len(a_runs), baseline=len(b_runs), unit="repeats"))
    if len(a_runs) >= 2 and len(b_runs) >= 2 and min(a_runs + b_runs) > 0:
        return _run_level(a_runs, b_runs, threshold, row, higher_is_better=higher_is_better)
    a_tokens, b_tokens = per_token_values(cand, metric), per_token_values(base, metric)
    if len(a_tokens) < 2 or len(b_tokens) < 2:
        row.update(p_value=None, test="none", effect=Effect.written(name="relative difference", scale="relative",
                                                                    value=num(row.candidate_value / row.baseline_value - 1.0)
                                                                    if row.baseline_value else None, ci=None),
                   mde=Mde.written(scale="relative", value=None, power=POWER, note="needs two or more repeats per arm"),
                   note="one run per arm and no per-token data: needs two or more repeats per arm for a test")
        return None
    zeros = sum(1 for x in (*a_tokens, *b_tokens) if x <= 0)
    if zeros:  # a relative (log-scale) comparison needs positive gaps; zeros come only from a client that stamps once per network read
        row.update(candidate_value=float(np.median(a_tokens)), baseline_value=float(np.median(b_tokens)), p_value=None, test="none",
                   effect=Effect.written(name="relative median difference", scale="relative", value=None, ci=None),
                   mde=Mde.written(scale="relative", value=None, power=POWER, note="zero gaps"),
                   note=f"{zeros} zero inter-token gaps: a client that gave every event of one network read the same time "
                        "(results before ITL definition 2); rerun the benchmark for a test")
        return None
    boot = relative_median_diff_ci(a_tokens, b_tokens, confidence=CONFIDENCE, n_resamples=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED)
    equivalence = tost_equivalence(a_tokens, b_tokens, margin=threshold, relative=True, alpha=1 - CONFIDENCE) if threshold else None
    row.update(candidate_value=float(np.median(a_tokens)), baseline_value=float(np.median(b_tokens)),
               p_value=mann_whitney(a_tokens, b_tokens).p_value,
               test="Mann–Whitney U on per-token ITLs; bootstrap relative median difference" + (" + TOST" if equivalence else ""),
               effect=Effect.written(name="relative median difference", scale="relative", value=boot.estimate,
                                     ci=interval(boot.ci)),
               n=ArmCounts.written(candidate=len(a_tokens), baseline=len(b_tokens), unit="inter-token gaps"),
               mde=_relative_mde(log_sd(a_tokens, b_tokens), len(a_tokens), len(b_tokens), threshold, repeats=False),
               note="one run per arm: the p-value says these two runs differ")
    if equivalence is not None:
        row.update(equivalence=_equivalence_entry(threshold, equivalence))
    return Pending(row, boot.estimate, boot.ci, threshold, higher_is_better, equivalence)


_ENGINES = {
    "rate_ratio": _compare_rate,
    "accept_shift": _compare_accept,
    "mcnemar": _compare_paired_questions,
    "fisher": _compare_proportions,
    "run_level": _compare_bench,
}


def _compare(name: str, cand: CaseRuns, base: CaseRuns, threshold: float, row: ComparisonRow) -> Pending | None:
    metric = BY_NAME[name]
    return _ENGINES[metric.statistic](metric, cand, base, threshold, row)


# ---------------------------------------------------------------- the public entry point


def check_thresholds(thresholds: dict[str, float] | None) -> dict[str, float]:
    """DEFAULT_THRESHOLDS with the given overrides; unknown metrics or bad values raise."""
    merged = dict(DEFAULT_THRESHOLDS)
    for name, value in (thresholds or {}).items():
        if name not in merged:
            raise SpecsuiteError(f"unknown threshold metric {name!r}; expected one of {', '.join(METRICS)}")
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not (0 <= value < math.inf):
            raise SpecsuiteError(f"threshold for {name} must be a number >= 0, got {value!r}")
        merged[name] = float(value)
    return merged


_ANALYSIS_KEYS = ("family_alpha", "correction", "confidence", "power", "baseline", "candidates", "arm_order", "thresholds",
                  "workloads", "notes", "comparisons", "estimates", "repeat_spread", "metrics", "report_rows", "spread_rows")


def compare_arms(results: Document | dict[str, Any], *, alpha: float = 0.05,
                 thresholds: dict[str, float] | None = None) -> Comparison:
    """Every candidate arm against the baseline arm: comparisons, per-arm estimates and spread.
    Reads the typed document (a results dict is loaded as one); returns the typed `Comparison`
    (its ``to_dict()`` is what a results file holds under ``ab_compare``)."""
    if not isinstance(results, (dict, Document)):
        raise SpecsuiteError(f"compare_arms needs a results dict, got {type(results).__name__}")
    if not (isinstance(alpha, (int, float)) and 0 < alpha < 1):
        raise SpecsuiteError(f"alpha must be strictly between 0 and 1, got {alpha!r}")
    limits = check_thresholds(thresholds)
    document = Document.of(results)
    order, baseline, notes = arm_roles(document)
    gathered = {name: gather_arm(document.arms[name]) for name in order}
    workloads = {family: "run" if any(data[family] for data in gathered.values()) else "not run" for family in ("gsm8k", "bench")}

    pending: list[Pending] = []
    untested: list[ComparisonRow] = []
    candidates = [name for name in order if baseline is not None and name != baseline]
    for candidate in candidates:
        for metric in METRICS:
            kind = BY_NAME[metric].source
            base_cases = gathered[baseline][kind]
            for case_id, cand_runs in sorted_cases(gathered[candidate][kind]):
                if case_id not in base_cases:
                    continue
                row = _base_row(metric, case_id, candidate, baseline, cand_runs)
                row.update(threshold=limits[metric])
                outcome = _compare(metric, cand_runs, base_cases[case_id], limits[metric], row)
                if outcome is not None:
                    pending.append(outcome)
                elif row.effect is not None:  # both arms have data but no test applies
                    untested.append(row)

    comparisons = _mark_suspect(_decide(pending, alpha) + [_undecided(row) for row in untested])
    comparisons.sort(key=lambda r: (METRICS.index(r.metric), r.temperature, r.top_p, order.index(r.candidate)))
    table = metric_table()
    analysis = Comparison(
        family_alpha=alpha, correction="holm", confidence=CONFIDENCE, power=POWER, baseline=baseline, candidates=candidates,
        arm_order=order, thresholds=limits, workloads=workloads, notes=notes, comparisons=comparisons,
        estimates=estimates(order, gathered), repeat_spread=repeat_spread(order, gathered),
        metrics={name: MetricFacts.from_dict(facts) for name, facts in table["metrics"].items()},
        report_rows=table["report_rows"], spread_rows=table["spread_rows"], key_order=_ANALYSIS_KEYS)
    return analysis


def _decide(pending: list[Pending], alpha: float) -> list[ComparisonRow]:
    """Holm over the whole family, then one verdict per row."""
    if not pending:
        return []
    adjusted = holm([p.row.p_value for p in pending], alpha=alpha).adjusted
    rows = []
    for item, p_adjusted in zip(pending, adjusted, strict=True):
        item.row.update(p_adjusted=p_adjusted)
        item.row.update(verdict=verdict(p_adjusted, item.effect, item.ci, item.threshold, item.higher_is_better,
                                       equivalence=item.equivalence, alpha=alpha))
        rows.append(item.row)
    return rows


def _undecided(row: ComparisonRow) -> ComparisonRow:
    row.update(p_adjusted=None, verdict="inconclusive")
    return row


def _mark_suspect(rows: list[ComparisonRow]) -> list[ComparisonRow]:
    """"better" becomes "suspect" on a metric whose rise is the founding bug's signature (accept length)
    when the same candidate arm is "worse" on a corruption sign (invalid/fallback/padded ids, strays) in any case."""
    signs: dict[str, dict[str, list[str]]] = {}  # candidate -> metric -> cases where it is worse
    for row in rows:
        if BY_NAME[row.metric].corruption_sign and row.verdict == "worse":
            signs.setdefault(row.candidate, {}).setdefault(row.metric, []).append(str(row.case_id))
    for row in rows:
        found = signs.get(row.candidate)
        if found and row.verdict == "better" and BY_NAME[row.metric].suspect_when_better:
            cases = sorted({case for where in found.values() for case in where})
            note = SUSPECT_NOTE.format(signs=f"{', '.join(found)} ({', '.join(cases)})")
            row.verdict, row.suspect_because = SUSPECT, found
            row.note = f"{note}; {row.note}" if row.note else note
    return rows


# ---------------------------------------------------------------- run values outside a results dict


def compare_run_values(candidate: Sequence[float], baseline: Sequence[float], *, metric: str, threshold: float,
                       higher_is_better: bool, target_effect: float | None = None) -> ComparisonRow:
    """The run-level engine of `compare_arms` on bare run values (one per repeat, each arm >= 2, all > 0).

    For the calibration scripts, whose run-summary fields (median TPOT, chunk gaps) are not registry
    metrics: the row `compare_arms` writes for a benchmark metric with repeats (Welch on log values,
    TOST within `threshold`, MDE, `mde.repeats_needed` for `target_effect` (default the threshold),
    the rank pair under `rank`), with a verdict on the unadjusted p-value (`p_adjusted` stays None:
    there is no family here; Holm across several calls is the caller's).  The row is typed; ``to_dict()`` where it is written.
    """
    a, b = [float(v) for v in candidate], [float(v) for v in baseline]
    entry = BY_NAME.get(metric)
    row = ComparisonRow.written(metric=metric, label=entry.label if entry else metric, unit=entry.unit if entry else "",
                                candidate_value=float(np.median(a)) if a else None, baseline_value=float(np.median(b)) if b else None,
                                effect=None, p_value=None, p_adjusted=None, mde=None, test=None,
                                n=ArmCounts.written(candidate=len(a), baseline=len(b), unit="repeats"),
                                higher_is_better=higher_is_better, threshold=threshold, note=None, verdict="inconclusive",
                                candidate_runs=a, baseline_runs=b)
    if len(a) < 2 or len(b) < 2 or min(a + b) <= 0:
        row.update(note="needs two or more positive run values per arm")
        return row
    pending = _run_level(a, b, threshold, row, higher_is_better=higher_is_better, target_effect=target_effect)
    if pending is not None:
        row.update(verdict=verdict(row.p_value, pending.effect, pending.ci, threshold, higher_is_better,
                                  equivalence=pending.equivalence, alpha=1 - CONFIDENCE))
    return row


def _signed(value: float | None) -> str:
    return "∞" if value is None else f"{value:+.3%}"


def describe_run_level(typed: ComparisonRow) -> str:
    """One comparison row of a run-level metric in words: effect, 95 % CI, p, TOST, then the rank pair."""
    name = f"{typed.metric}" + (f" {typed.case_id}" if typed.case_id else "")
    effect = typed.effect or Effect()
    if typed.p_value is None:
        return f"{name}: no test ({typed.note or 'needs two or more repeats per arm'})"
    if not effect.has("ci") or effect.ci is None:
        return f"{name}: {typed.verdict} (identical run values: no interval)"
    low, high = effect.ci
    line = f"{name}: {_signed(effect.value)} [95% CI {_signed(low)}, {_signed(high)}], p={typed.p_value:.3g}"
    if typed.p_adjusted is not None:
        line += f" (Holm {typed.p_adjusted:.3g})"
    equivalence = typed.equivalence
    if equivalence is not None and equivalence.to_dict():
        tost_low, tost_high = equivalence.ci
        line += (f", TOST 90% CI [{_signed(tost_low)}, {_signed(tost_high)}]: "
                 f"{'equivalent' if equivalence.equivalent else 'not shown equivalent'} within ±{equivalence.margin:.2%}")
    n = typed.n or ArmCounts()
    line += f" -> {typed.verdict} (n={n.candidate}+{n.baseline} {n.unit}"
    sd = typed.mde.sd_log if typed.mde is not None else None
    line += f", between-run sd {sd:.3%})" if sd else ")"
    rank = typed.rank or RankPair()
    if rank.test:
        rank_low, rank_high = rank.ci
        line += (f"\n    rank-based: Hodges-Lehmann {_signed(rank.estimate)} [{rank.confidence:.1%} CI {_signed(rank_low)}, "
                 f"{_signed(rank_high)}], Mann-Whitney p={rank.p_value:.3g}; "
                 f"{'equivalent' if rank.equivalent else 'not shown equivalent'} within ±{rank.margin:.2%}")
    return line
