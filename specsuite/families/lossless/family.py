"""The lossless family: each arm's losslessness tests against a speculation-off reference, as pass flags.

Records: a repeat's `workloads.lossless` (specsuite/pytest_plugin/lossless.py): per sampling setting its PIT
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

from specsuite.compare.engines import Pending, pooled
from specsuite.compare.metric import Metric
from specsuite.compare.series import CONFIDENCE, CaseRuns, interval, proportion_series, sorted_cases
from specsuite.families.lossless.options import MAIN_JOB, OPTIONS, LosslessSettings
from specsuite.families.lossless.records import (
    AcceptanceBetting,
    LoglikCalibration,
    LosslessDirected,
    LosslessGreedy,
    LosslessPit,
    LosslessTwoSample,
    TokenHomogeneity,
    TopTokenRate,
    lossless_results,
)
from specsuite.families.workload_family import (
    AbsoluteRule,
    FamilyRecord,
    FamilyView,
    VerdictRule,
    WorkloadFamily,
    one_table_section,
    setting_record,
    workloads_of,
)
from specsuite.results.types import ArmCounts, ComparisonRow, Effect, Repeat, ReportSection, fmt_p
from specsuite.stats import fisher_exact_2x2


@dataclass(frozen=True)
class LosslessRecord:
    """One case of a session's lossless results: a setting's PIT and two-sample results, the directed tests
    pooled over settings, or the greedy comparison (the others None)."""

    pit: LosslessPit | None = None
    two_sample: LosslessTwoSample | None = None
    directed: LosslessDirected | None = None
    greedy: LosslessGreedy | None = None


# One test's result: each holds its own verdict (`passed`); all but greedy equality their p-value.
TestResult = LosslessPit | TokenHomogeneity | LoglikCalibration | TopTokenRate | AcceptanceBetting | LosslessGreedy


@dataclass(frozen=True)
class LosslessTest:
    """One lossless test as a metric: where its result sits in a record, and how one result reads."""

    name: str
    label: str
    short: str
    pick: Callable[[LosslessRecord], TestResult | None]
    version: int = 1  # the metric's version (specsuite/compare/metric.py): bumped when the test's definition changes

    def result(self, record: LosslessRecord) -> TestResult | None:
        """The test's result in a record, when it ran there and holds its `passed` flag."""
        found = self.pick(record)
        return found if found is not None and found.has("passed") else None

    def passed(self, record: LosslessRecord) -> tuple[int, int] | None:
        """(1, 1) when it passed, (0, 1) when it failed, None when it did not run."""
        found = self.result(record)
        return None if found is None else (int(bool(found.passed)), 1)


def _applicable_betting(record: LosslessRecord) -> AcceptanceBetting | None:
    """The acceptance betting test where it applies (it needs per-step acceptance stats)."""
    test = record.directed.acceptance_betting if record.directed else None
    return test if test is not None and test.applicable else None


TESTS = (
    LosslessTest("lossless_pit", "PIT calibration", "PIT", lambda record: record.pit),
    LosslessTest("lossless_two_sample", "two-sample token homogeneity", "two-sample",
                 lambda record: record.two_sample.homogeneity if record.two_sample else None),
    LosslessTest("lossless_loglik", "log-likelihood calibration", "log-likelihood",
                 lambda record: record.two_sample.calibration if record.two_sample else None),
    LosslessTest("lossless_mode_rate", "mode drawn at the target's rate", "mode rate",
                 lambda record: record.directed.top_token_rate if record.directed else None, version=2),  # 2: two-sided
    LosslessTest("lossless_acceptance_betting", "draft acceptance calibrated", "acceptance betting", _applicable_betting),
    LosslessTest("lossless_greedy", "greedy equality", "greedy equality", lambda record: record.greedy),
)
BY_NAME = {test.name: test for test in TESTS}

METRICS: tuple[Metric, ...] = tuple(
    Metric(test.name, test.label, "fraction of repeats passed", "higher", 0.0, "difference", "pass_flag", "lossless", "proportion",
           test.passed, test.label, "proportion", short=test.short, axis_label="% of repeats passed", version=test.version)
    for test in TESTS)


def outcome(result: TestResult) -> str:
    """One test result as the report reads it: pass or FAIL, with its p-value (greedy: its real divergences)."""
    verdict = "pass" if result.passed else "FAIL"
    if not isinstance(result, LosslessGreedy):
        return f"{verdict} (p {fmt_p(result.p_value)})"
    real = result.real_divergences()
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


def _setting(entry: LosslessPit | LosslessTwoSample | None) -> tuple[float, float] | None:
    setting = entry.setting if entry is not None else None
    if setting is None or setting.temperature is None:
        return None
    return float(setting.temperature), float(setting.top_p)


def _records(repeat: Repeat) -> list[FamilyRecord]:
    results = lossless_results(workloads_of(repeat))
    if results is None:
        return []
    pit, two_sample = results.pit, results.two_sample
    records = []
    for key in dict.fromkeys([*pit, *two_sample]):  # each setting once, in the order it ran
        setting = _setting(pit.get(key) or two_sample.get(key))
        record = LosslessRecord(pit=pit.get(key), two_sample=two_sample.get(key))
        records.append(FamilyRecord(key, *(setting or (None, None)), record))
    directed = results.directed
    if directed is not None:
        records.append(FamilyRecord(f"pooled over {', '.join(directed.settings)}", None, None, LosslessRecord(directed=directed)))
    if results.greedy is not None:
        records.append(setting_record(0.0, 1.0, LosslessRecord(greedy=results.greedy)))
    return records


# ---------------------------------------------------------------- the report's line and section


def _state(view: FamilyView, arm: str) -> str:
    """How many test results passed, and which tests failed where."""
    results = [(test, case_id, found) for case_id, runs in sorted_cases(view.cases.get(arm) or {}) for test in TESTS
               for _, record in runs.runs if (found := test.result(record)) is not None]
    if not results:
        return ""
    failed = list(dict.fromkeys(f"{test.short} ({case_id})" for test, case_id, found in results if not found.passed))
    text = f"{sum(bool(found.passed) for _, _, found in results)} of {len(results)} test results passed"
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
    metrics=METRICS, verdict_rules=RULES, state=_state, section=_section, effect_in_line=False, checks_losslessness=True,
    # options, settings and nightly rules
    options=OPTIONS, settings=LosslessSettings, main_job=MAIN_JOB,
    main_job_markers="lossless and not greedy_equality", main_job_part="lossless",
    absolute_rules=(AbsoluteRule("lossless", "a failed lossless test", "test_lossless"),),
    # workload driver, pytest marker and fixtures
    marker=("lossless", "distribution-preservation tests"), pytest_plugin="specsuite.pytest_plugin.lossless",
)
