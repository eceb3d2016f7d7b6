"""The lossless family: each arm's losslessness tests against a speculation-off reference, as pass flags.

Records: a repeat's `workloads.lossless` (suites/plugin_lossless.py): per sampling setting its PIT
calibration and its two-sample test (token homogeneity and log-likelihood calibration); the directed
tests pooled over the settings with top_p 1 (mode rate, acceptance betting, one case); greedy equality
at T=0.  Each test already holds its own verdict at the run's lossless alpha (`passed`) and its p-value.

Metrics: one pass flag per test and case, read as a proportion (repeats passed out of repeats), which
the history stores and trends.  Verdict rule ("pass_flag"): no new statistic where the flags settle it:
a candidate that failed where its baseline passed every repeat is worse, the reverse better, both
passing every repeat equivalent, both failing every repeat inconclusive; only when both arms passed some
repeats and failed others does Fisher's exact test on the pass counts (scipy.stats.fisher_exact) decide,
with Holm like every tested row.  The stored p-values ride along in the row's note and the section.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.compare.engines import Pending, pooled
from harness.compare.metric import Metric
from harness.compare.series import CONFIDENCE, CaseRuns, interval, proportion_series, sorted_cases
from harness.families.family import (
    FamilyRecord,
    FamilyView,
    VerdictRule,
    WorkloadFamily,
    one_table_section,
    setting_record,
    workloads_of,
)
from harness.results.types import ArmCounts, ComparisonRow, Effect, Repeat, ReportSection, fmt_p
from harness.stats import fisher_exact_2x2


@dataclass(frozen=True)
class LosslessRecord:
    """One case of a session's lossless results: a setting's PIT and two-sample results, the directed tests
    pooled over settings, or the greedy comparison (the others None)."""

    pit: dict[str, Any] | None = None
    two_sample: dict[str, Any] | None = None
    directed: dict[str, Any] | None = None
    greedy: dict[str, Any] | None = None


@dataclass(frozen=True)
class LosslessTest:
    """One lossless test as a metric: where its result sits in a record, and how one result reads."""

    name: str
    label: str
    short: str
    pick: Callable[[LosslessRecord], dict[str, Any] | None]

    def result(self, record: LosslessRecord) -> dict[str, Any] | None:
        """The test's result in a record, when it ran there (a dict with its `passed` flag)."""
        found = self.pick(record)
        return found if isinstance(found, dict) and "passed" in found else None

    def passed(self, record: LosslessRecord) -> tuple[int, int] | None:
        """(1, 1) when it passed, (0, 1) when it failed, None when it did not run."""
        found = self.result(record)
        return None if found is None else (int(bool(found["passed"])), 1)


def _part(record: LosslessRecord, section: str, key: str) -> dict[str, Any] | None:
    return (getattr(record, section) or {}).get(key)


def _applicable_betting(record: LosslessRecord) -> dict[str, Any] | None:
    """The acceptance betting test where it applies (it needs per-step acceptance stats)."""
    test = _part(record, "directed", "acceptance_betting")
    return test if isinstance(test, dict) and test.get("applicable") else None


TESTS = (
    LosslessTest("lossless_pit", "PIT calibration", "PIT", lambda record: record.pit),
    LosslessTest("lossless_two_sample", "two-sample token homogeneity", "two-sample",
                 lambda record: _part(record, "two_sample", "homogeneity")),
    LosslessTest("lossless_loglik", "log-likelihood calibration", "log-likelihood",
                 lambda record: _part(record, "two_sample", "calibration")),
    LosslessTest("lossless_mode_rate", "mode not over-drawn", "mode rate", lambda record: _part(record, "directed", "top_token_rate")),
    LosslessTest("lossless_acceptance_betting", "draft acceptance calibrated", "acceptance betting", _applicable_betting),
    LosslessTest("lossless_greedy", "greedy equality", "greedy equality", lambda record: record.greedy),
)
BY_NAME = {test.name: test for test in TESTS}

METRICS: tuple[Metric, ...] = tuple(
    Metric(test.name, test.label, "fraction of repeats passed", "higher", 0.0, "difference", "pass_flag", "lossless", "proportion",
           test.passed, test.label, "proportion", short=test.short, axis_label="% of repeats passed")
    for test in TESTS)


def outcome(result: dict[str, Any]) -> str:
    """One test result as the report reads it: pass or FAIL, with its p-value (greedy: its real divergences)."""
    verdict = "pass" if result["passed"] else "FAIL"
    if "p_value" in result:
        return f"{verdict} (p {fmt_p(result['p_value'])})"
    real = sum(int(run.get("real") or 0) for run in result.get("concurrencies") or [])
    return f"{verdict} ({real} real divergence{'' if real == 1 else 's'})"


def _outcomes(test: LosslessTest, runs: CaseRuns) -> str:
    """Every repeat's outcome of one test at one case, in run order."""
    return "; ".join(outcome(found) for _, record in runs.runs if (found := test.result(record)) is not None)


# ---------------------------------------------------------------- the verdict rule


def flag_verdict(passed_candidate: int, candidate_repeats: int, passed_baseline: int, baseline_repeats: int) -> str | None:
    """The verdict the pass flags settle without a test, or None when both arms passed some repeats and failed others."""
    candidate_clean, baseline_clean = passed_candidate == candidate_repeats, passed_baseline == baseline_repeats
    if candidate_clean and baseline_clean:
        return "equivalent"
    if baseline_clean:
        return "worse"  # the candidate failed a test its baseline passed every time
    if candidate_clean:
        return "better"
    if passed_candidate == 0 and passed_baseline == 0:
        return "inconclusive"  # both failed every repeat: the flags tell the arms nothing apart
    return None


def _compare_pass_flags(metric: Metric, cand: CaseRuns, base: CaseRuns, threshold: float, row: ComparisonRow) -> Pending | None:
    totals = pooled(proportion_series(cand, metric), proportion_series(base, metric))
    if totals is None:
        return None
    k1, n1, k2, n2 = (int(v) for v in totals)
    difference = k1 / n1 - k2 / n2
    test = BY_NAME[metric.name]
    row.update(candidate_value=k1 / n1, baseline_value=k2 / n2, test="each arm's own test against the reference (stored pass flags)",
               effect=Effect.written(name="pass-rate difference", scale="difference", value=difference, ci=None),
               n=ArmCounts.written(candidate=n1, baseline=n2, unit="repeats"),
               events=ArmCounts.written(candidate=n1 - k1, baseline=n2 - k2, unit="failed repeats"),
               note=f"candidate {_outcomes(test, cand)}; baseline {_outcomes(test, base)}")
    ruled = flag_verdict(k1, n1, k2, n2)
    if ruled is not None:
        return Pending(row, difference, (difference, difference), threshold, metric.higher_is_better, ruled=ruled)
    res = fisher_exact_2x2(k1, n1, k2, n2, confidence=CONFIDENCE, odds_ratio_ci=False)
    row.update(p_value=res.p_value, test="Fisher's exact test on the repeats' pass counts (scipy.stats.fisher_exact)",
               effect=Effect.written(name="pass-rate difference", scale="difference", value=res.risk_difference,
                                     ci=interval(res.risk_difference_ci)))
    return Pending(row, res.risk_difference, res.risk_difference_ci, threshold, metric.higher_is_better)


RULES = (
    VerdictRule("pass_flag", "each arm's stored pass flag: failed where the baseline passed every repeat = worse; "
                             "both arms mixed over repeats: Fisher's exact test on the pass counts", _compare_pass_flags),
)


# ---------------------------------------------------------------- records


def _setting(entry: dict[str, Any]) -> tuple[float, float] | None:
    setting = entry.get("setting") if isinstance(entry, dict) else None
    if not isinstance(setting, dict) or setting.get("temperature") is None:
        return None
    return float(setting["temperature"]), float(setting.get("top_p", 1.0))


def _records(repeat: Repeat) -> list[FamilyRecord]:
    results = workloads_of(repeat).extra.get("lossless")  # suites/plugin_lossless.py's dict, untyped in the results model
    if not isinstance(results, dict):
        return []
    pit, two_sample = results.get("pit") or {}, results.get("two_sample") or {}
    records = []
    for key in dict.fromkeys([*pit, *two_sample]):  # each setting once, in the order it ran
        setting = _setting(pit.get(key) or two_sample.get(key))
        record = LosslessRecord(pit=pit.get(key), two_sample=two_sample.get(key))
        records.append(FamilyRecord(key, *(setting or (None, None)), record))
    directed = results.get("directed")
    if isinstance(directed, dict):
        records.append(FamilyRecord(f"pooled over {', '.join(directed.get('settings') or [])}", None, None,
                                    LosslessRecord(directed=directed)))
    greedy = results.get("greedy")
    if isinstance(greedy, dict):
        records.append(setting_record(0.0, 1.0, LosslessRecord(greedy=greedy)))
    return records


# ---------------------------------------------------------------- the report's line and section


def _state(view: FamilyView, arm: str) -> str:
    """How many test results passed, and which tests failed where."""
    results = [(test, case_id, found) for case_id, runs in sorted_cases(view.cases.get(arm) or {}) for test in TESTS
               for _, record in runs.runs if (found := test.result(record)) is not None]
    if not results:
        return ""
    failed = list(dict.fromkeys(f"{test.short} ({case_id})" for test, case_id, found in results if not found["passed"]))
    text = f"{sum(bool(found['passed']) for _, _, found in results)} of {len(results)} test results passed"
    return text + (f"; failed: {', '.join(failed)}" if failed else "")


def _section(view: FamilyView) -> ReportSection | None:
    """A "Lossless" table: one row per test and case, each arm's pass/FAIL with its p-value per repeat, the verdicts."""
    cases: dict[str, dict[str, CaseRuns]] = {}
    for arm in view.arm_order:
        for case_id, runs in sorted_cases(view.cases.get(arm) or {}):
            cases.setdefault(case_id, {})[arm] = runs
    rows = []
    for test in TESTS:
        for case_id, by_arm in cases.items():
            cells = [_outcomes(test, by_arm[arm]) if arm in by_arm else "" for arm in view.arm_order]
            if any(cells):
                rows.append([test.label, case_id, *(cell or "–" for cell in cells), *view.verdict_cells([test.name], case_id)])
    if not rows:
        return None
    return one_table_section(
        "Lossless", "Each arm's losslessness tests against the speculation-off reference (suites/test_lossless.py): pass or "
                    "FAIL at the run's lossless alpha with the test's p-value (greedy equality: its real divergences), one "
                    "entry per repeat. A candidate that failed a test its baseline passed every time is worse; when both arms "
                    "passed some repeats and failed others, Fisher's exact test on the pass counts decides.",
        view.table_header("test", "case"), rows)


FAMILY = WorkloadFamily(
    name="lossless", label="lossless", results_key="workloads.lossless", suite_module="test_lossless", records=_records,
    metrics=METRICS, verdict_rules=RULES, state=_state, section=_section, effect_in_line=False,
)
