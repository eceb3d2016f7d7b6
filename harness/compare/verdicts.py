"""A/B verdicts: every candidate arm of a merged results dict against the baseline arm.

`compare_arms(results)` reads the merged `results.json` shape (`arms.<name>.repeats[].cases` and
`.workloads`) and returns, JSON-ready (non-finite numbers become None):

- `comparisons`: one row per (metric, sampling case, candidate) with both arms' values, the
  effect with its 95 % interval, the raw and Holm-adjusted p-value (Holm over every row that has
  a p-value), the minimum detectable effect at the sample size in hand, and a verdict;
- `estimates`: per (arm, case, metric) the pooled value with its 95 % interval (what the report's
  before/after tables show), and `repeat_spread`: one value per repeat with min/max/mean/sd
  (both from harness.compare.metrics, which also defines the metrics and reads them).

Tests, one per metric family (the first arm of each test is the candidate):

- event rates (`invalid_ids`, `fallback_ids`, `padded_row_ids`, `stray_per_1200`,
  `fragment_excess`, and from server counters `nonfinite_draft_probs` per sampler batch and
  `sampler_fallbacks` per committed token): events pooled over repeats, exact conditional
  rate-ratio test; effect = rate ratio.  Non-finite entries cluster inside batches, so that
  row's p-value is optimistic; it is a symptom counter, the id rows carry the verdict.
- `accept_length`: one repeat per arm: Mann–Whitney on the per-request values with the
  Hodges–Lehmann relative shift and its interval; two or more repeats per arm: the repeat is the
  experimental unit, so Welch's t on log run-level medians (effect = ratio of geometric means - 1).
- `gsm8k_accuracy`: exact McNemar on questions paired by index within the same repeat number;
  effect = accuracy difference.  `gsm8k_invalid`: Fisher's exact test; effect = risk difference.
- `itl_median`, `output_throughput` (bench): two or more repeats per arm: Welch's t on log
  run-level values; one repeat with per-token ITLs: bootstrap interval of the relative median
  difference, Mann–Whitney p-value.  TOST within the practical threshold decides "equivalent".

Verdicts (asv style, `harness.stats.verdict`): "worse"/"better" need a Holm-adjusted p below
alpha AND an effect past the practical threshold (`DEFAULT_THRESHOLDS`, overridable per metric).
For rates the threshold is on the rate ratio, except that from a zero-event baseline any increase
counts (and a drop to zero from a non-zero baseline is a full drop).  GSM8K thresholds are in
absolute proportion (0.02 = 2 points), the rest relative (0.02 = 2 %).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.compare.metrics import (
    CONFIDENCE,
    GSM8K_DEFINITION,
    HIGHER_IS_BETTER,
    LABELS,
    METRICS,
    RATES,
    UNITS,
    CaseRuns,
    RateMetric,
    accept_series,
    arm_roles,
    estimates,
    gather_arm,
    gsm8k_counts,
    interval,
    itl_ms,
    metric_family,
    num,
    rate_series,
    repeat_spread,
    run_values,
    sorted_cases,
)
from harness.errors import SpecsuiteError
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

DEFAULT_THRESHOLDS = {
    **{name: 0.10 for name in RATES},  # rate ratio beyond 1.10 (any increase from a zero baseline)
    "accept_length": 0.02,
    "gsm8k_accuracy": 0.02,
    "gsm8k_invalid": 0.01,
    "itl_median": 0.01,
    "output_throughput": 0.01,
}


@dataclass
class Pending:
    """A comparison row waiting for its Holm-adjusted p-value and verdict."""

    row: dict[str, Any]
    effect: float  # on the verdict's scale (log ratio for rates)
    ci: tuple[float, float]
    threshold: float
    higher_is_better: bool
    equivalence: EquivalenceResult | None = None


def _log(value: float) -> float:
    return -math.inf if value <= 0 else math.inf if math.isinf(value) else math.log(value)


def _pooled_log_sd(*samples: Sequence[float]) -> float:
    """Pooled standard deviation of log values (the relative scale's noise)."""
    logs = [np.log(np.asarray(s, dtype=float)) for s in samples]
    dof = sum(x.size - 1 for x in logs)
    if dof <= 0:
        return 0.0
    return math.sqrt(sum(float(np.sum((x - x.mean()) ** 2)) for x in logs) / dof)


def _relative_mde(sd_log: float, n1: int, n2: int, threshold: float, repeats: bool) -> dict[str, Any]:
    mde: dict[str, Any] = {"scale": "relative", "value": None, "power": POWER, "note": None}
    if sd_log <= 0 or min(n1, n2) < 2:
        mde["note"] = "no variation to scale it by" if sd_log <= 0 else "too few values"
        return mde
    mde["value"] = num(math.expm1(mde_mean_diff(sd_log, n1, n2, alpha=1 - CONFIDENCE, power=POWER)))
    if repeats and threshold > 0:
        try:
            mde["repeats_needed"] = repeats_needed_for_mde(sd_log, threshold, alpha=1 - CONFIDENCE, power=POWER)
        except StatsInputError as exc:
            mde["note"] = str(exc)
    return mde


def _base_row(metric: str, case_id: str, candidate: str, baseline: str, runs: CaseRuns) -> dict[str, Any]:
    return {"metric": metric, "label": LABELS[metric], "case_id": case_id, "temperature": runs.temperature,
            "top_p": runs.top_p, "candidate": candidate, "baseline": baseline, "unit": UNITS[metric],
            "candidate_value": None, "baseline_value": None, "effect": None, "p_value": None, "mde": None,
            "test": None, "n": None, "higher_is_better": metric in HIGHER_IS_BETTER, "note": None}


def _compare_rate(metric: RateMetric, cand: CaseRuns, base: CaseRuns, threshold: float, row: dict[str, Any]) -> Pending | None:
    c_series, b_series = rate_series(cand, metric), rate_series(base, metric)
    if not c_series or not b_series:
        return None
    k1, e1 = sum(s[1] for s in c_series), sum(s[2] for s in c_series)
    k2, e2 = sum(s[1] for s in b_series), sum(s[2] for s in b_series)
    res = rate_ratio_test(k1, e1, k2, e2, confidence=CONFIDENCE)
    row.update(candidate_value=k1 / e1 * metric.scale, baseline_value=k2 / e2 * metric.scale, p_value=res.p_value,
               test="exact conditional rate-ratio test (binomial)",
               effect={"name": "rate ratio", "scale": "ratio", "value": num(res.rate_ratio),
                       "ci": interval(res.rate_ratio_ci),
                       "difference": num(res.rate_difference * metric.scale),
                       "difference_ci": interval(res.rate_difference_ci, metric.scale)},
               n={"candidate": e1, "baseline": e2, "unit": metric.exposure_unit},
               events={"candidate": k1, "baseline": k2}, mde=_rate_mde(metric, k1, e1, k2, e2))
    if k1 == 0 and k2 == 0:
        effect = 0.0
        row["note"] = "no events in either arm"
    elif k1 == 0 or k2 == 0:  # a zero arm: continuity-corrected log ratio, so the direction stays finite
        effect = math.log(((k1 + 0.5) / e1) / ((k2 + 0.5) / e2))
    else:
        effect = math.log(res.rate_ratio)
    # From a zero-event baseline any increase is practically relevant.
    practical = 0.0 if k2 == 0 else math.log1p(threshold)
    return Pending(row, effect, (_log(res.rate_ratio_ci[0]), _log(res.rate_ratio_ci[1])), practical, higher_is_better=False)


def _rate_mde(metric: RateMetric, k1: int, e1: float, k2: int, e2: float) -> dict[str, Any]:
    """Ratio detectable over a non-zero baseline; from zero, the smallest detectable rate."""
    if k2 > 0:
        value = mde_rate_ratio(e1, e2, k2 / e2, alpha=1 - CONFIDENCE, power=POWER)
        return {"scale": "ratio", "value": num(value), "power": POWER, "note": None}
    try:
        value = mde_two_proportions(max(1, round(e1)), max(1, round(e2)), 0.0, alpha=1 - CONFIDENCE, power=POWER)
    except StatsInputError as exc:
        return {"scale": "absolute", "value": None, "power": POWER, "note": str(exc)}
    return {"scale": "absolute", "value": num(value * metric.scale), "power": POWER,
            "note": f"smallest detectable rate ({metric.unit}) over a zero-event baseline"}


def _compare_accept(cand: CaseRuns, base: CaseRuns, threshold: float, row: dict[str, Any]) -> Pending | None:
    c_series, b_series = accept_series(cand), accept_series(base)
    if not c_series or not b_series:
        return None
    if len(c_series) >= 2 and len(b_series) >= 2:
        a, b = run_level_medians([v for _, v in c_series]), run_level_medians([v for _, v in b_series])
        row.update(candidate_value=float(np.median(a)), baseline_value=float(np.median(b)),
                   n={"candidate": len(a), "baseline": len(b), "unit": "repeats"},
                   mde=_relative_mde(_pooled_log_sd(a, b), len(a), len(b), threshold, repeats=True))
        return _welch_pending(a, b, threshold, row, higher_is_better=True, equivalence_margin=None)
    a = np.concatenate([v for _, v in c_series])
    b = np.concatenate([v for _, v in b_series])
    shift = hodges_lehmann(a, b, confidence=CONFIDENCE, relative=True)
    row.update(candidate_value=float(np.median(a)), baseline_value=float(np.median(b)),
               p_value=mann_whitney(a, b).p_value, test="Mann–Whitney U; Hodges–Lehmann relative shift",
               effect={"name": "Hodges–Lehmann shift (relative)", "scale": "relative", "value": num(shift.estimate),
                       "ci": interval(shift.ci)},
               n={"candidate": int(a.size), "baseline": int(b.size), "unit": "requests"},
               mde=_relative_mde(_pooled_log_sd(a, b), int(a.size), int(b.size), threshold, repeats=False))
    return Pending(row, shift.estimate, shift.ci, threshold, higher_is_better=True)


def _welch_pending(a: Sequence[float], b: Sequence[float], threshold: float, row: dict[str, Any], *,
                   higher_is_better: bool, equivalence_margin: float | None) -> Pending | None:
    """Run-level comparison on the log scale; identical constant runs are equal, other constants untestable."""
    row["test"] = "Welch t on log run-level values" + (" + TOST" if equivalence_margin else "")
    try:
        res = welch_ttest(a, b, confidence=CONFIDENCE, relative=True)
    except StatsInputError as exc:
        same = list(a) == list(b)
        row.update(p_value=1.0 if same else None, note=None if same else str(exc),
                   effect={"name": "relative difference", "scale": "relative",
                           "value": num(float(np.mean(a)) / float(np.mean(b)) - 1.0), "ci": None})
        return Pending(row, 0.0, (0.0, 0.0), threshold, higher_is_better) if same else None
    equivalence = None
    if equivalence_margin:
        equivalence = tost_equivalence(a, b, margin=equivalence_margin, relative=True, alpha=1 - CONFIDENCE)
        row["equivalence"] = {"margin": equivalence_margin, "p_value": equivalence.p_value, "equivalent": equivalence.equivalent}
    row.update(p_value=res.p_value, effect={"name": "ratio of geometric means - 1", "scale": "relative",
                                            "value": num(res.estimate), "ci": interval(res.ci)})
    return Pending(row, res.estimate, res.ci, threshold, higher_is_better, equivalence)


def _compare_gsm8k_accuracy(cand: CaseRuns, base: CaseRuns, threshold: float, row: dict[str, Any]) -> Pending | None:
    a_all: list[bool] = []
    b_all: list[bool] = []
    base_runs = dict(base.runs)
    for number, run in cand.runs:
        if number in base_runs and "per_question" in run and "per_question" in base_runs[number]:
            try:
                pairs = paired_outcomes(run, base_runs[number], GSM8K_DEFINITION)
            except SpecsuiteError as exc:  # different shots or data: that repeat cannot be paired
                row["note"] = f"repeat {number} not paired: {exc}"
                continue
            a_all += pairs.a
            b_all += pairs.b
    if not a_all:
        return None
    res = mcnemar_from_pairs(a_all, b_all, confidence=CONFIDENCE)
    p_base = float(np.mean(b_all))
    row.update(candidate_value=float(np.mean(a_all)), baseline_value=p_base, p_value=res.p_value,
               test="exact McNemar (paired by question)",
               effect={"name": "accuracy difference", "scale": "difference", "value": res.difference,
                       "ci": interval(res.difference_ci)},
               n={"candidate": res.n_pairs, "baseline": res.n_pairs, "unit": "paired questions"},
               events={"candidate": res.a_only, "baseline": res.b_only, "unit": "discordant pairs"},
               mde=_proportion_mde(res.n_pairs, res.n_pairs, min(p_base, 1.0 - p_base),
                                   "accuracy drop detectable (unpaired approximation, conservative)"))
    return Pending(row, res.difference, res.difference_ci, threshold, higher_is_better=True)


def _proportion_mde(n1: int, n2: int, p_base: float, note: str) -> dict[str, Any]:
    # The arcsine scale is symmetric, so a drop from p equals a rise from 1 - p.
    try:
        value = mde_two_proportions(n1, n2, p_base, alpha=1 - CONFIDENCE, power=POWER)
    except StatsInputError as exc:
        return {"scale": "difference", "value": None, "power": POWER, "note": str(exc)}
    return {"scale": "difference", "value": num(value), "power": POWER, "note": note}


def _compare_gsm8k_invalid(cand: CaseRuns, base: CaseRuns, threshold: float, row: dict[str, Any]) -> Pending | None:
    c_counts = [c for _, run in cand.runs if (c := gsm8k_counts(run, "invalid"))]
    b_counts = [c for _, run in base.runs if (c := gsm8k_counts(run, "invalid"))]
    if not c_counts or not b_counts:
        return None
    k1, n1 = sum(c[0] for c in c_counts), sum(c[1] for c in c_counts)
    k2, n2 = sum(c[0] for c in b_counts), sum(c[1] for c in b_counts)
    res = fisher_exact_2x2(k1, n1, k2, n2, confidence=CONFIDENCE, odds_ratio_ci=False)
    row.update(candidate_value=k1 / n1, baseline_value=k2 / n2, p_value=res.p_value, test="Fisher's exact test",
               effect={"name": "risk difference", "scale": "difference", "value": res.risk_difference,
                       "ci": interval(res.risk_difference_ci)},
               n={"candidate": n1, "baseline": n2, "unit": "answered questions"},
               events={"candidate": k1, "baseline": k2},
               mde=_proportion_mde(n1, n2, k2 / n2, "smallest detectable rise in the invalid rate"))
    return Pending(row, res.risk_difference, res.risk_difference_ci, 0.0 if k2 == 0 else threshold, higher_is_better=False)


def _compare_bench(metric: str, cand: CaseRuns, base: CaseRuns, threshold: float, row: dict[str, Any]) -> Pending | None:
    a_runs, b_runs = [v for _, v in run_values(cand, metric)], [v for _, v in run_values(base, metric)]
    if not a_runs or not b_runs:
        return None
    higher_is_better = metric == "output_throughput"
    row.update(candidate_value=float(np.median(a_runs)), baseline_value=float(np.median(b_runs)),
               n={"candidate": len(a_runs), "baseline": len(b_runs), "unit": "repeats"})
    if len(a_runs) >= 2 and len(b_runs) >= 2 and min(a_runs + b_runs) > 0:
        row["mde"] = _relative_mde(_pooled_log_sd(a_runs, b_runs), len(a_runs), len(b_runs), threshold, repeats=True)
        return _welch_pending(a_runs, b_runs, threshold, row, higher_is_better=higher_is_better,
                              equivalence_margin=threshold or None)
    a_itl = [x for _, run in cand.runs for x in itl_ms(run)] if metric == "itl_median" else []
    b_itl = [x for _, run in base.runs for x in itl_ms(run)] if metric == "itl_median" else []
    if len(a_itl) < 2 or len(b_itl) < 2:
        row.update(p_value=None, test="none", effect={"name": "relative difference", "scale": "relative",
                                                      "value": num(row["candidate_value"] / row["baseline_value"] - 1.0)
                                                      if row["baseline_value"] else None, "ci": None},
                   mde={"scale": "relative", "value": None, "power": POWER, "note": "needs two or more repeats per arm"},
                   note="one run per arm and no per-token data: needs two or more repeats per arm for a test")
        return None
    boot = relative_median_diff_ci(a_itl, b_itl, confidence=CONFIDENCE, n_resamples=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED)
    equivalence = tost_equivalence(a_itl, b_itl, margin=threshold, relative=True, alpha=1 - CONFIDENCE) if threshold else None
    row.update(candidate_value=float(np.median(a_itl)), baseline_value=float(np.median(b_itl)),
               p_value=mann_whitney(a_itl, b_itl).p_value,
               test="Mann–Whitney U on per-token ITLs; bootstrap relative median difference" + (" + TOST" if equivalence else ""),
               effect={"name": "relative median difference", "scale": "relative", "value": boot.estimate,
                       "ci": interval(boot.ci)},
               n={"candidate": len(a_itl), "baseline": len(b_itl), "unit": "inter-token gaps"},
               mde=_relative_mde(_pooled_log_sd(a_itl, b_itl), len(a_itl), len(b_itl), threshold, repeats=False),
               note="one run per arm: the p-value says these two runs differ")
    if equivalence is not None:
        row["equivalence"] = {"margin": threshold, "p_value": equivalence.p_value, "equivalent": equivalence.equivalent}
    return Pending(row, boot.estimate, boot.ci, threshold, higher_is_better, equivalence)


def _compare(metric: str, cand: CaseRuns, base: CaseRuns, threshold: float, row: dict[str, Any]) -> Pending | None:
    if metric in RATES:
        return _compare_rate(RATES[metric], cand, base, threshold, row)
    if metric == "accept_length":
        return _compare_accept(cand, base, threshold, row)
    if metric == "gsm8k_accuracy":
        return _compare_gsm8k_accuracy(cand, base, threshold, row)
    if metric == "gsm8k_invalid":
        return _compare_gsm8k_invalid(cand, base, threshold, row)
    return _compare_bench(metric, cand, base, threshold, row)


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


def compare_arms(results: dict[str, Any], *, alpha: float = 0.05, thresholds: dict[str, float] | None = None) -> dict[str, Any]:
    """Every candidate arm against the baseline arm: comparisons, per-arm estimates and spread."""
    if not isinstance(results, dict):
        raise SpecsuiteError(f"compare_arms needs a results dict, got {type(results).__name__}")
    if not (isinstance(alpha, (int, float)) and 0 < alpha < 1):
        raise SpecsuiteError(f"alpha must be strictly between 0 and 1, got {alpha!r}")
    limits = check_thresholds(thresholds)
    order, baseline, notes = arm_roles(results)
    gathered = {name: gather_arm(results["arms"][name]) for name in order}
    workloads = {family: "run" if any(data[family] for data in gathered.values()) else "not run" for family in ("gsm8k", "bench")}

    pending: list[Pending] = []
    untested: list[dict[str, Any]] = []
    candidates = [name for name in order if baseline is not None and name != baseline]
    for candidate in candidates:
        for metric in METRICS:
            kind = metric_family(metric)
            base_cases = gathered[baseline][kind]
            for case_id, cand_runs in sorted_cases(gathered[candidate][kind]):
                if case_id not in base_cases:
                    continue
                row = _base_row(metric, case_id, candidate, baseline, cand_runs)
                row["threshold"] = limits[metric]
                outcome = _compare(metric, cand_runs, base_cases[case_id], limits[metric], row)
                if outcome is not None:
                    pending.append(outcome)
                elif row["effect"] is not None:  # both arms have data but no test applies
                    untested.append(row)

    comparisons = _decide(pending, alpha) + [_undecided(row) for row in untested]
    comparisons.sort(key=lambda r: (METRICS.index(r["metric"]), r["temperature"], r["top_p"], order.index(r["candidate"])))
    return {
        "family_alpha": alpha,
        "correction": "holm",
        "confidence": CONFIDENCE,
        "power": POWER,
        "baseline": baseline,
        "candidates": candidates,
        "arm_order": order,
        "thresholds": limits,
        "workloads": workloads,
        "notes": notes,
        "comparisons": comparisons,
        "estimates": estimates(order, gathered),
        "repeat_spread": repeat_spread(order, gathered),
    }


def _decide(pending: list[Pending], alpha: float) -> list[dict[str, Any]]:
    """Holm over the whole family, then one verdict per row."""
    if not pending:
        return []
    adjusted = holm([p.row["p_value"] for p in pending], alpha=alpha).adjusted
    rows = []
    for item, p_adjusted in zip(pending, adjusted, strict=True):
        item.row["p_adjusted"] = p_adjusted
        item.row["verdict"] = verdict(p_adjusted, item.effect, item.ci, item.threshold, item.higher_is_better,
                                      equivalence=item.equivalence, alpha=alpha)
        rows.append(item.row)
    return rows


def _undecided(row: dict[str, Any]) -> dict[str, Any]:
    row.update(p_adjusted=None, verdict="inconclusive")
    return row
