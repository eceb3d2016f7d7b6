"""A/B verdicts: every candidate arm of a merged results document against the baseline arm.

`compare_arms(document)` reads the typed merged `results.json` (specsuite.results.types.Document) (`arms.<name>.repeats[].cases` and
`.workloads`) and returns the typed `Comparison` (specsuite.results.types), JSON-ready through its
``to_dict()`` (non-finite numbers become None):

- `comparisons`: one row per (metric, sampling case, candidate) with both arms' values, the
  effect with its 95 % interval, the raw and Holm-adjusted p-value (Holm over every row that has
  a p-value), the minimum detectable effect at the sample size in hand, and a verdict;
- `estimates`: per (arm, case, metric) the pooled value with its 95 % interval (what the report's
  before/after tables show), and `repeat_spread`: one value per repeat with min/max/mean/sd
  (both from specsuite.analysis.metrics);
- `metrics`, `report_rows`, `spread_rows`: the metric registry's facts (labels, units,
  directions, thresholds, tests, report rows) for the report, which does not import the harness;
- `families`: each described workload family's facts (its verdict lines' figures per arm, its own
  report section: specsuite/families/).  A family is described when it has data in some arm, or when
  the report names it even when absent (correctness, GSM8K, the bench); only described families'
  metrics and thresholds are written.

Every registered family's metrics are compared (specsuite.families.registry); each metric's test is
the verdict rule its `statistic` names, which its family registers:

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
- `pass_flag` (the lossless tests): each arm's stored pass flag decides where it can (failed where the
  baseline passed = worse); Fisher's exact test on pass counts when both arms are mixed over repeats.
- `violations`, `check_violations` (integrity): a rise from zero violations is worse; otherwise the
  exact conditional rate-ratio test on violations per checked answer.

Verdicts (asv style, `specsuite.stats.verdict`): "worse"/"better" need a Holm-adjusted p below
alpha AND an effect past the practical threshold (the registry's, overridable per metric).  For
rates the threshold is on the rate ratio, except that from a zero-event baseline any increase
counts (and a drop to zero from a non-zero baseline is a full drop).  GSM8K thresholds are in
absolute proportion (0.02 = 2 points), the rest relative (0.02 = 2 %).  One more verdict,
"suspect": an accept-length row that would be "better" for a candidate arm that is "worse", in
any case, on a corruption sign (invalid, fallback or padded-row ids, stray rate, sampler
fallbacks) is the recycled-draft_probs bug's signature, not a speed-up (`_mark_suspect`).  A higher accept length
with no corruption sign is a speed-up only where the candidate's losslessness was checked
(`_guard_acceptance`): "worse" when the candidate fails a lossless test its baseline passes (an
over-accepting sampler: acceptance bought by leaving the target distribution), "better" when every
lossless comparison of the arm is "equivalent" or "better", and "unverified" when no lossless test
compared the two arms (or both failed it).  A verdict a rule decides without a test (`Pending.ruled`:
the lossless pass flags, a violation over a clean baseline) stays out of Holm.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from specsuite.analysis.metric_registry import SUSPECT_NOTE, default_thresholds, metric_table
from specsuite.analysis.metrics import ArmData, arm_roles, estimates, gather_arm, repeat_spread
from specsuite.compare.engines import POWER, Pending, run_level
from specsuite.compare.metric import Metric
from specsuite.compare.series import CONFIDENCE, CaseRuns, setting_order, sorted_cases
from specsuite.errors import SpecsuiteError
from specsuite.families.registry import families, metric, registered_metrics, verdict_rule
from specsuite.families.registry import family as registered_family
from specsuite.families.workload_family import FamilyView, WorkloadFamily
from specsuite.results.types import (
    ArmCounts,
    Comparison,
    ComparisonRow,
    Document,
    Effect,
    EstimateRow,
    FamilyFacts,
    RankPair,
)
from specsuite.stats import holm, verdict

SUSPECT = "suspect"
UNVERIFIED = "unverified"
# A lossless comparison that vouches for the candidate: it passed every repeat of a test its baseline passed too (or failed).
LOSSLESS_VOUCHES = ("equivalent", "better")
OVER_ACCEPTING_NOTE = ("higher accept length in an arm that fails lossless tests its baseline passes ({tests}): an "
                       "over-accepting sampler (drafts accepted more often than p/q allows), not a speed-up")
UNVERIFIED_NOTE = ("higher accept length whose losslessness was not checked ({why}): a sampler that accepts too often "
                   "looks the same; run the lossless suite in both arms (-m lossless)")


def _base_row(entry: Metric, case_id: str, candidate: str, baseline: str, runs: CaseRuns) -> ComparisonRow:
    return ComparisonRow.written(metric=entry.name, label=entry.label, case_id=case_id, temperature=runs.temperature,
                                 top_p=runs.top_p, candidate=candidate, baseline=baseline, unit=entry.unit,
                                 candidate_value=None, baseline_value=None, effect=None, p_value=None, mde=None,
                                 test=None, n=None, higher_is_better=entry.higher_is_better, note=None)


def _compare(entry: Metric, cand: CaseRuns, base: CaseRuns, threshold: float, row: ComparisonRow) -> Pending | None:
    return verdict_rule(entry.statistic).compare(entry, cand, base, threshold, row)


# ---------------------------------------------------------------- the public entry point


def check_thresholds(thresholds: dict[str, float] | None) -> dict[str, float]:
    """Every registered metric's default threshold with the given overrides; unknown metrics or bad values raise."""
    merged = default_thresholds()
    for name, value in (thresholds or {}).items():
        if name not in merged:
            raise SpecsuiteError(f"unknown threshold metric {name!r}; expected one of {', '.join(merged)}")
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not (0 <= value < math.inf):
            raise SpecsuiteError(f"threshold for {name} must be a number >= 0, got {value!r}")
        merged[name] = float(value)
    return merged


_ANALYSIS_KEYS = ("family_alpha", "correction", "confidence", "power", "baseline", "candidates", "arm_order", "thresholds",
                  "workloads", "notes", "comparisons", "estimates", "repeat_spread", "metrics", "report_rows", "spread_rows",
                  "families")


def compare_arms(document: Document, *, alpha: float = 0.05, thresholds: dict[str, float] | None = None) -> Comparison:
    """Every candidate arm against the baseline arm: comparisons, per-arm estimates and spread.
    Reads the typed document; returns the typed `Comparison` (its ``to_dict()`` is what a results
    file holds under ``ab_compare``)."""
    if not isinstance(document, Document):
        raise SpecsuiteError(f"compare_arms needs a results Document, got {type(document).__name__}")
    if not (isinstance(alpha, (int, float)) and 0 < alpha < 1):
        raise SpecsuiteError(f"alpha must be strictly between 0 and 1, got {alpha!r}")
    limits = check_thresholds(thresholds)
    order, baseline, notes = arm_roles(document)
    gathered = {name: gather_arm(document.arms[name]) for name in order}
    ran = {family.name: any(data[family.name] for data in gathered.values()) for family in families()}
    described = [family for family in families() if family.reported_when_absent or ran[family.name]]
    workloads = {family.name: "run" if ran[family.name] else "not run" for family in described if family.is_workload}

    pending: list[Pending] = []
    untested: list[ComparisonRow] = []
    candidates = [name for name in order if baseline is not None and name != baseline]
    for candidate in candidates:
        for entry in registered_metrics():
            base_cases = gathered[baseline][entry.source]
            for case_id, cand_runs in sorted_cases(gathered[candidate][entry.source]):
                if case_id not in base_cases:
                    continue
                row = _base_row(entry, case_id, candidate, baseline, cand_runs)
                row.update(threshold=limits[entry.name])
                outcome = _compare(entry, cand_runs, base_cases[case_id], limits[entry.name], row)
                if outcome is not None:
                    pending.append(outcome)
                elif row.effect is not None:  # both arms have data but no test applies
                    untested.append(row)

    comparisons = _guard_acceptance(_mark_suspect(_decide(pending, alpha) + [_undecided(row) for row in untested]))
    names = [entry.name for entry in registered_metrics()]
    comparisons.sort(key=lambda r: (names.index(r.metric), setting_order(r.temperature, r.top_p), order.index(r.candidate)))
    table = metric_table(described)
    per_arm = estimates(order, gathered)
    analysis = Comparison(
        family_alpha=alpha, correction="holm", confidence=CONFIDENCE, power=POWER, baseline=baseline, candidates=candidates,
        arm_order=order, thresholds={name: limits[name] for name in table.metrics}, workloads=workloads, notes=notes,
        comparisons=comparisons, estimates=per_arm, repeat_spread=repeat_spread(order, gathered),
        metrics=table.metrics, report_rows=table.report_rows, spread_rows=table.spread_rows,
        families=_family_facts(described, document, order, baseline, gathered, per_arm, comparisons), key_order=_ANALYSIS_KEYS)
    return analysis


def _family_facts(described: list[WorkloadFamily], document: Document, order: list[str], baseline: str | None,
                  gathered: dict[str, ArmData], per_arm: list[EstimateRow], comparisons: list[ComparisonRow]) -> dict[str, FamilyFacts]:
    """Each described family's facts for the report: its lines' figures per arm and its own section."""
    facts = {}
    for family in described:
        own = {entry.name for entry in family.metrics}
        view = FamilyView(document, order, baseline, {arm: gathered[arm][family.name] for arm in order},
                          [row for row in per_arm if row.metric in own], [row for row in comparisons if row.metric in own])
        facts[family.name] = family.facts(view)
    return facts


def _decide(pending: list[Pending], alpha: float) -> list[ComparisonRow]:
    """Holm over every tested row of the whole analysis, then one verdict per row; a rule's own verdict as it is."""
    tested = [item for item in pending if item.ruled is None]
    adjusted = iter(holm([item.row.p_value for item in tested], alpha=alpha).adjusted if tested else [])
    rows = []
    for item in pending:
        if item.ruled is not None:
            item.row.update(p_adjusted=None, verdict=item.ruled, verdict_by_rule=True)
        else:
            p_adjusted = next(adjusted)
            item.row.update(p_adjusted=p_adjusted)
            item.row.update(verdict=verdict(p_adjusted, item.effect, item.ci, item.threshold, item.higher_is_better,
                                           equivalence=item.equivalence, alpha=alpha))
        rows.append(item.row)
    return rows


def _undecided(row: ComparisonRow) -> ComparisonRow:
    row.update(p_adjusted=None, verdict="inconclusive")
    return row


def _mark_suspect(rows: list[ComparisonRow]) -> list[ComparisonRow]:
    """"better" becomes "suspect" on a metric whose rise is the signature of corrupt draft probabilities (accept length)
    when the same candidate arm is "worse" on a corruption sign (invalid/fallback/padded ids, strays) in any case."""
    signs: dict[str, dict[str, list[str]]] = {}  # candidate -> metric -> cases where it is worse
    for row in rows:
        if metric(row.metric).corruption_sign and row.verdict == "worse":
            signs.setdefault(row.candidate, {}).setdefault(row.metric, []).append(str(row.case_id))
    for row in rows:
        found = signs.get(row.candidate)
        if found and row.verdict == "better" and metric(row.metric).suspect_when_better:
            cases = sorted({case for where in found.values() for case in where})
            note = SUSPECT_NOTE.format(signs=f"{', '.join(found)} ({', '.join(cases)})")
            row.verdict, row.suspect_because = SUSPECT, found
            row.note = f"{note}; {row.note}" if row.note else note
    return rows


def _guard_acceptance(rows: list[ComparisonRow]) -> list[ComparisonRow]:
    """A "better" accept length (no corruption sign: `_mark_suspect` left it) is judged by the candidate's lossless
    comparisons against the same baseline: any "worse" makes it "worse" (over-acceptance), all of them "equivalent"
    or "better" keep it "better", none (or only undecided ones) make it "unverified"."""
    lossless: dict[str, list[ComparisonRow]] = {}
    for row in rows:
        if registered_family(metric(row.metric).source).checks_losslessness:
            lossless.setdefault(row.candidate, []).append(row)
    for row in rows:
        if row.verdict != "better" or not metric(row.metric).suspect_when_better:
            continue
        checks = lossless.get(row.candidate, [])
        failed = [check for check in checks if check.verdict == "worse"]
        if failed:
            tests = ", ".join(dict.fromkeys(f"{metric(check.metric).short or check.metric} {check.case_id}" for check in failed))
            row.verdict, row.note = "worse", _noted(OVER_ACCEPTING_NOTE.format(tests=tests), row.note)
        elif not checks or any(check.verdict not in LOSSLESS_VOUCHES for check in checks):
            why = ("no lossless test ran in both arms" if not checks else
                   "undecided lossless comparisons: " + ", ".join(dict.fromkeys(
                       f"{metric(check.metric).short or check.metric} {check.case_id} {check.verdict}"
                       for check in checks if check.verdict not in LOSSLESS_VOUCHES)))
            row.verdict, row.note = UNVERIFIED, _noted(UNVERIFIED_NOTE.format(why=why), row.note)
    return rows


def _noted(note: str, earlier: str | None) -> str:
    return f"{note}; {earlier}" if earlier else note


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
    entry = next((known for known in registered_metrics() if known.name == metric), None)
    row = ComparisonRow.written(metric=metric, label=entry.label if entry else metric, unit=entry.unit if entry else "",
                                candidate_value=float(np.median(a)) if a else None, baseline_value=float(np.median(b)) if b else None,
                                effect=None, p_value=None, p_adjusted=None, mde=None, test=None,
                                n=ArmCounts.written(candidate=len(a), baseline=len(b), unit="repeats"),
                                higher_is_better=higher_is_better, threshold=threshold, note=None, verdict="inconclusive",
                                candidate_runs=a, baseline_runs=b)
    if len(a) < 2 or len(b) < 2 or min(a + b) <= 0:
        row.update(note="needs two or more positive run values per arm")
        return row
    pending = run_level(a, b, threshold, row, higher_is_better=higher_is_better, target_effect=target_effect)
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
