"""Run-level A/B of benchmark runs: is the candidate different from the baseline, equivalent
within a margin, and how many repeats would a given effect need?

The repeat is the experimental unit (the requests of one run share its server process), so each
metric is reduced to one value per run (`median_itl_ms`, `median_tpot_ms`, `output_throughput`,
...) and compared on the log scale: Welch's t for the difference (estimate = ratio of geometric
means - 1, with its 95% interval), TOST within ±margin for equivalence (90% interval), and
`repeats_needed_for_mde` on the pooled sd of the log run values for the repeats a target effect
needs. Beside them, a rank-based pair that one disturbed run cannot swing (a busy machine makes
a run slower, never faster, so run values have a long one-sided tail): Mann-Whitney for the
difference and the Hodges-Lehmann shift of log values with its exact interval; its TOST form is
the 90% interval inside ±margin. `bench_results_document` wraps session summaries in the merged
results shape that `harness.compare.verdicts.compare_arms` and `harness.compare.fail_on` read.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from harness.stats import (
    StatsInputError,
    hodges_lehmann,
    mann_whitney,
    repeats_needed_for_mde,
    tost_equivalence,
    welch_ttest,
)

DEFAULT_METRICS = ("median_itl_ms", "median_tpot_ms", "output_throughput")
HIGHER_IS_BETTER = frozenset({"output_throughput", "request_throughput", "input_throughput", "total_throughput", "accept_length"})


def log_sd(*arms: Sequence[float]) -> float | None:
    """Pooled within-arm sd of log run values (about their coefficient of variation)."""
    parts = [np.log(np.asarray(a, dtype=float)) for a in arms if len(a) >= 2]
    dof = sum(p.size - 1 for p in parts)
    if not dof:
        return None
    return math.sqrt(sum(float(np.sum((p - p.mean()) ** 2)) for p in parts) / dof)


def robust_log_sd(*arms: Sequence[float]) -> float | None:
    """The same spread from the median absolute deviation (1.4826 * MAD of log values about each
    arm's median): what a rank-based comparison sees when a few runs hit a disturbed machine."""
    parts = [np.log(np.asarray(a, dtype=float)) for a in arms if len(a) >= 2]
    if not parts:
        return None
    deviations = np.concatenate([np.abs(p - np.median(p)) for p in parts])
    return float(1.4826 * np.median(deviations))


def compare_metric(candidate: Sequence[float], baseline: Sequence[float], *, margin: float,
                   alpha: float = 0.05, target_effect: float | None = None) -> dict[str, Any]:
    """Welch (difference), TOST (equivalence within ±margin) and repeats needed, on log run values."""
    result: dict[str, Any] = {"n_candidate": len(candidate), "n_baseline": len(baseline), "margin": margin, "alpha": alpha,
                              "candidate_runs": list(candidate), "baseline_runs": list(baseline)}
    sd = log_sd(candidate, baseline)
    result["sd_log_between_runs"] = sd
    effect = target_effect if target_effect is not None else margin
    result["target_effect"] = effect
    result["repeats_needed"] = repeats_needed_for_mde(sd, effect, alpha=alpha) if sd else None
    try:
        diff = welch_ttest(candidate, baseline, confidence=1 - alpha, relative=True)
        equiv = tost_equivalence(candidate, baseline, margin=margin, relative=True, alpha=alpha)
    except StatsInputError as exc:
        result.update(estimate=None, note=str(exc), different=None, equivalent=None)
        return result
    result.update(
        estimate=diff.estimate, ci=list(diff.ci), p_value=diff.p_value, different=diff.p_value < alpha,
        tost_ci=list(equiv.ci), tost_p_value=equiv.p_value, equivalent=equiv.equivalent,
    )
    try:
        result.update(_rank_based(candidate, baseline, margin, alpha))
    except StatsInputError as exc:
        result.update(rank_estimate=None, rank_note=str(exc))
    return result


def _rank_based(candidate: Sequence[float], baseline: Sequence[float], margin: float, alpha: float) -> dict[str, Any]:
    """Mann-Whitney p, Hodges-Lehmann relative shift with its 1-alpha and 1-2*alpha intervals."""
    shift = hodges_lehmann(candidate, baseline, confidence=1 - alpha, relative=True)
    shift_tost = hodges_lehmann(candidate, baseline, confidence=1 - 2 * alpha, relative=True)
    p_value = mann_whitney(candidate, baseline).p_value
    return {"rank_estimate": shift.estimate, "rank_ci": list(shift.ci), "rank_ci_confidence": shift.achieved_confidence,
            "rank_p_value": p_value, "rank_different": p_value < alpha, "rank_tost_ci": list(shift_tost.ci),
            "rank_equivalent": -margin < shift_tost.ci[0] and shift_tost.ci[1] < margin}


def compare_records(candidate: Sequence[dict[str, Any]], baseline: Sequence[dict[str, Any]], *, margin: float,
                    alpha: float = 0.05, target_effect: float | None = None,
                    metrics: Sequence[str] = DEFAULT_METRICS) -> dict[str, dict[str, Any]]:
    """`compare_metric` for each metric over the runs' records (or session summaries)."""
    out = {}
    for key in metrics:
        a = [float(r[key]) for r in candidate if r.get(key) is not None]
        b = [float(r[key]) for r in baseline if r.get(key) is not None]
        out[key] = compare_metric(a, b, margin=margin, alpha=alpha, target_effect=target_effect)
        out[key]["higher_is_better"] = key in HIGHER_IS_BETTER
    return out


def describe(key: str, row: dict[str, Any]) -> str:
    """One line per metric: estimate, 95% CI, p, TOST verdict."""
    if row.get("estimate") is None:
        return f"{key}: no test ({row.get('note', 'needs two or more runs per arm')})"
    low, high = row["ci"]
    verdicts = []
    verdicts.append(f"different (p={row['p_value']:.3g})" if row["different"] else f"no difference detected (p={row['p_value']:.3g})")
    verdicts.append(f"equivalent within ±{row['margin']:.2%}" if row["equivalent"] else f"not shown equivalent within ±{row['margin']:.2%}")
    line = (f"{key}: {row['estimate']:+.3%} [95% CI {low:+.3%}, {high:+.3%}], "
            f"TOST 90% CI [{row['tost_ci'][0]:+.3%}, {row['tost_ci'][1]:+.3%}] -> {'; '.join(verdicts)} "
            f"(n={row['n_candidate']}+{row['n_baseline']}, between-run sd {row['sd_log_between_runs']:.3%})")
    if row.get("rank_estimate") is not None:
        rank_low, rank_high = row["rank_ci"]
        line += (f"\n    rank-based: Hodges-Lehmann {row['rank_estimate']:+.3%} [{row['rank_ci_confidence']:.1%} CI {rank_low:+.3%}, "
                 f"{rank_high:+.3%}], Mann-Whitney p={row['rank_p_value']:.3g} -> "
                 f"{'different' if row['rank_different'] else 'no difference detected'}; "
                 f"{'equivalent' if row['rank_equivalent'] else 'not shown equivalent'} within ±{row['margin']:.2%}")
    return line


def bench_results_document(arms: dict[str, Sequence[dict[str, Any]]], baseline: str) -> dict[str, Any]:
    """Session summaries per arm in the merged results shape (`arms.<name>.repeats[].workloads.bench`)."""
    order = [name for name in arms if name != baseline] + [baseline]
    return {
        "arm_order": order,
        "baseline_arm": baseline,
        "arms": {name: {"repeats": [{"repeat": i, "workloads": {"bench": run}} for i, run in enumerate(arms[name], start=1)]}
                 for name in order},
    }
