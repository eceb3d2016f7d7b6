"""The integrity family: protocol violations in every answer a session received, per check and in all.

Records: a repeat's `workloads.integrity_checks` (specsuite.families.integrity.recorder.IntegrityRecorder
.to_dict): the answers checked, the violations in all (the case "all checks") and per check (one case per
check of specsuite.server.integrity_rules.CHECKS, and any other the counts name).  Metrics: the
violations per checked answer in all (`integrity_violations`) and per check (`integrity_check_violations`),
both event rates the history stores and trends.

Verdict rules: a violation is a broken answer, so any rise from a violation-free baseline is worse,
decided by that rule (no test, out of Holm); where the baseline has violations, the exact conditional
rate-ratio test on violations per checked answer pooled over repeats decides, as for the correctness
rates (specsuite.compare.engines.compare_rate).  Neither arm with a violation: "none in either arm" for
the total, and no row at all for a single check (twelve empty rows would only hide the one that fired).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from specsuite.compare.engines import Engine, Pending, compare_rate, pooled
from specsuite.compare.metric import Events, Metric
from specsuite.compare.series import CaseRuns, rate_series, sorted_cases
from specsuite.families.integrity.options import OPTIONS, IntegritySettings
from specsuite.families.integrity.records import IntegrityChecks, integrity_totals
from specsuite.families.workload_family import AbsoluteRule, FamilyRecord, FamilyView, VerdictRule, WorkloadFamily, one_table_section, workloads_of
from specsuite.results.types import ComparisonRow, Repeat, ReportSection, Workloads
from specsuite.server.integrity_rules import CHECKS

ALL_CHECKS = "all checks"  # the case of the total


@dataclass(frozen=True)
class IntegrityRecord:
    """One repeat's violations of one check (`check`), or of all checks (`check` None), and the answers checked."""

    check: str | None
    violations: int
    answers_checked: int


def _events(total: bool) -> Callable[[IntegrityRecord], Events | None]:
    """Violations out of answers checked, for the total record (`total`) or a single check's."""
    def extract(record: IntegrityRecord) -> Events | None:
        if (record.check is None) != total or record.answers_checked <= 0:
            return None
        return record.violations, float(record.answers_checked)
    return extract


def _metric(name: str, label: str, statistic: str, total: bool, short: str) -> Metric:
    return Metric(name, label, "per checked answer", "lower", 0.10, "ratio", statistic, "integrity", "events", _events(total),
                  f"{label} / checked answers", "plain", exposure_unit="checked answers", bad_events=True, short=short,
                  axis_label="violations per checked answer")


METRICS: tuple[Metric, ...] = (
    _metric("integrity_violations", "integrity violations", "violations", True, "violations"),
    _metric("integrity_check_violations", "integrity violations of one check", "check_violations", False, "violations per check"),
)


# ---------------------------------------------------------------- the verdict rules


def _violations_rule(row_when_clean: bool) -> Engine:
    """Rise from zero: worse by rule; a baseline with violations: the exact rate-ratio test; none in either arm: a row
    that says so (`row_when_clean`) or none."""
    def compare(metric: Metric, cand: CaseRuns, base: CaseRuns, threshold: float, row: ComparisonRow) -> Pending | None:
        totals = pooled(rate_series(cand, metric), rate_series(base, metric))
        if totals is None or (not row_when_clean and totals[0] == 0 and totals[2] == 0):
            return None
        pending = compare_rate(metric, cand, base, threshold, row)
        candidate_violations, baseline_violations = totals[0], totals[2]
        if pending is None or baseline_violations > 0:
            return pending
        if candidate_violations == 0:
            row.update(p_value=None, test="none", note="no violation in either arm: nothing to test")
            return None  # read as "none in either arm"
        row.update(note="a violation where the baseline has none is worse: each is a broken answer (the p-value is shown, "
                        "not used)")
        pending.ruled = "worse"
        return pending
    return compare


RULES = (
    VerdictRule("violations", "any violation over a violation-free baseline = worse; else the exact conditional rate-ratio "
                              "test (binomial) on violations per checked answer pooled over repeats", _violations_rule(True)),
    VerdictRule("check_violations", "as `violations`, for one check; a check with no violation in either arm has no row",
                _violations_rule(False)),
)


# ---------------------------------------------------------------- records


def _records(repeat: Repeat) -> list[FamilyRecord]:
    written = workloads_of(repeat).part("integrity_checks")
    checks = IntegrityChecks.from_dict(written) if isinstance(written, dict) else None
    if checks is None or not checks.answers_checked:
        return []
    answers, counts = int(checks.answers_checked), checks.counts or {}
    records = [FamilyRecord(ALL_CHECKS, None, None, IntegrityRecord(None, int(checks.violations or 0), answers))]
    for check in dict.fromkeys([*CHECKS, *counts]):
        records.append(FamilyRecord(check, None, None, IntegrityRecord(check, int(counts.get(check) or 0), answers)))
    return records


# ---------------------------------------------------------------- the report's line and section


def _totals(runs: CaseRuns | None) -> tuple[int, int]:
    """(violations, answers checked) summed over an arm's repeats of one case."""
    records = [record for _, record in runs.runs] if runs is not None else []
    return sum(record.violations for record in records), sum(record.answers_checked for record in records)


def _state(view: FamilyView, arm: str) -> str:
    """Violations in all, out of the answers checked, and the checks that fired."""
    cases = view.cases.get(arm) or {}
    if ALL_CHECKS not in cases:
        return ""
    violations, answers = _totals(cases[ALL_CHECKS])
    fired = [f"{check} {count}" for check, runs in sorted_cases(cases) if check != ALL_CHECKS and (count := _totals(runs)[0])]
    return f"{violations} violations in {answers:,} checked answers" + (f" ({', '.join(fired)})" if fired else "")


def _section(view: FamilyView) -> ReportSection | None:
    """An "Integrity" table: violations out of answers checked per arm, in all and for each check that fired, the verdicts."""
    checks = list(dict.fromkeys(case_id for arm in view.arm_order for case_id, runs in sorted_cases(view.cases.get(arm) or {})
                                if case_id == ALL_CHECKS or _totals(runs)[0]))
    if not checks:
        return None
    rows = []
    for check in checks:
        cells = []
        for arm in view.arm_order:
            runs = (view.cases.get(arm) or {}).get(check)
            violations, answers = _totals(runs)
            cells.append(f"{violations} in {answers:,} answers" if runs is not None else "–")
        rows.append([check, *cells, *view.verdict_cells((metric.name for metric in METRICS), check)])
    return one_table_section(
        "Integrity", "Every answer the suites received, checked against the server's protocol rules "
                     "(its server kind's integrity rules): violations in all checked answers, summed over repeats, and per check "
                     "that fired. A violation where the baseline has none is worse; where the baseline has violations too, "
                     "the exact conditional rate-ratio test per checked answer decides.", view.table_header("check"), rows)


def _recorded_violations(workloads: Workloads) -> int:
    """The integrity violations a repeat recorded: the absolute gate fails an arm on one, whatever its tests said."""
    return int(integrity_totals(workloads).violations or 0)


FAMILY = WorkloadFamily(
    name="integrity", label="integrity", results_key="workloads.integrity_checks", suite_module="test_integrity",
    records=_records, metrics=METRICS, verdict_rules=RULES, state=_state, section=_section, effect_in_line=False,
    where_in_line=False,
    # options, settings and nightly rules
    options=OPTIONS, settings=IntegritySettings,
    absolute_rules=(AbsoluteRule("integrity", "integrity violations", "test_integrity", ("test_every_answer_in_the_session_passed_integrity",),
                                 recorded=_recorded_violations),),
    # workload driver, pytest marker and fixtures
    marker=("integrity", "response accounting and streaming integrity"), pytest_plugin="specsuite.pytest_plugin.integrity",
)
