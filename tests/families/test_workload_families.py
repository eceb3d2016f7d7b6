"""The workload-family registry (specsuite/families/): each family reaches the A/B verdicts, the report (Markdown and
HTML) and the history through its one registration; the lossless and integrity families' verdict rules; and a
family registered by a test reaches them with no change to the generic code."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from specsuite.analysis.fail_on import evaluate_fail_on
from specsuite.analysis.verdicts import compare_arms
from specsuite.compare.engines import Pending
from specsuite.compare.metric import Metric
from specsuite.compare.series import CaseRuns, run_values
from specsuite.families.lossless.family import flag_verdict
from specsuite.families.registry import register, registered
from specsuite.families.workload_family import FamilyCaveat, FamilyRecord, FamilyView, VerdictRule, WorkloadFamily, workloads_of
from specsuite.history import HistoryStore, analyse
from specsuite.history.ingest import items_from_results
from specsuite.reports.overview import verdict_lines
from specsuite.reports.render import render_report
from specsuite.reports.trends import display_unit
from specsuite.results.model import upgraded_document
from specsuite.results.types import (
    ANALYSIS_KEY,
    ECDF,
    Comparison,
    ComparisonRow,
    Document,
    EcdfPanel,
    FigureSpec,
    Repeat,
    ReportSection,
    ReportTable,
)
from tests.helpers.ab_results import make_results

ALPHA = 0.001  # the lossless suite's default alpha


# ---------------------------------------------------------------- results in the shapes the suites write


def _pit(temperature: float, top_p: float, p_value: float) -> dict[str, Any]:
    """A `LosslessWorkload.pit` result: its setting, the combined p-value and the pass flag (the rest trimmed)."""
    return {"setting": {"temperature": temperature, "top_p": top_p}, "requests": 300, "positions": 4200,
            "test": {"p_value": p_value, "alpha": ALPHA}, "p_value": p_value, "passed": p_value >= ALPHA}


def _two_sample(temperature: float, top_p: float, homogeneity: float, calibration: float) -> dict[str, Any]:
    """A `LosslessWorkload.two_sample` result: token homogeneity and log-likelihood calibration, each with its flag."""
    return {"setting": {"temperature": temperature, "top_p": top_p}, "prompts": 4, "samples_per_prompt": 200,
            "homogeneity": {"p_value": homogeneity, "alpha": ALPHA, "passed": homogeneity >= ALPHA},
            "calibration": {"z": 0.1, "p_value": calibration, "alpha": ALPHA, "passed": calibration >= ALPHA},
            "passed": min(homogeneity, calibration) >= ALPHA}


def lossless(*, pit_cold: float = 0.3, real_divergences: int = 0) -> dict[str, Any]:
    """`workloads.lossless` as specsuite/pytest_plugin/lossless.py writes it: PIT and two-sample per setting, the directed
    tests pooled over the top_p 1 settings, greedy equality; `pit_cold` is the PIT p-value at T=0.7, top_p 0.9."""
    return {"config": {"settings": ["t=1-top_p=1", "t=0.7-top_p=0.9"], "alpha": ALPHA},
            "pit": {"t=1-top_p=1": _pit(1.0, 1.0, 0.42), "t=0.7-top_p=0.9": _pit(0.7, 0.9, pit_cold)},
            "two_sample": {"t=1-top_p=1": _two_sample(1.0, 1.0, 0.5, 0.6)},
            "directed": {"settings": ["t=1-top_p=1"], "sources": {"t=1-top_p=1 pit": 4200},
                         "top_token_rate": {"n": 4200, "p_value": 0.2, "alpha": ALPHA, "passed": True},
                         "acceptance_betting": {"p_value": 1.0, "alpha": ALPHA, "passed": True, "applicable": False}},
            "greedy": {"prompts": 24, "passed": real_divergences == 0,
                       "concurrencies": [{"concurrency": 1, "prompts": 24, "equal": 24 - real_divergences, "numerics": 0,
                                          "real": real_divergences, "passed": real_divergences == 0}]}}


def integrity(answers: int = 400, **counts: int) -> dict[str, Any]:
    """`workloads.integrity_checks` (IntegrityRecorder.to_dict): answers checked, violations in all and per check."""
    return {"answers_checked": answers, "streams_checked": 0, "violations": sum(counts.values()), "counts": counts,
            "by_source": {}, "quotes": {}}


def two_arms(candidate: list[dict[str, Any]], baseline: list[dict[str, Any]]) -> dict[str, Any]:
    """A merged results dict whose repeats hold only these workloads (one dict per repeat); "fix" is the baseline."""
    return make_results({"nofix": [{"cases": [], "workloads": w} for w in candidate],
                         "fix": [{"cases": [], "workloads": w} for w in baseline]})


def _rows(analysis: Comparison, metric: str) -> dict[str, ComparisonRow]:
    return {str(row.case_id): row for row in analysis.comparisons if row.metric == metric}


def _report(results: dict[str, Any], out: Path) -> tuple[str, str]:
    results[ANALYSIS_KEY] = compare_arms(Document.from_dict(results)).to_dict()  # as results.json holds it
    render_report(Document.from_dict(results), out)
    return (out / "report.md").read_text(), (out / "report.html").read_text()


def _history(results: dict[str, Any], date: str = "2026-12-01") -> dict[str, list[Any]]:
    """Each arm's metrics, as `specsuite history ingest` would store them."""
    return {item.run.arm: item.metrics for item in items_from_results(upgraded_document(results), date=date, node="test")}


# ---------------------------------------------------------------- lossless


def test_lossless_reaches_the_verdict_the_report_and_the_history(tmp_path: Path) -> None:
    results = two_arms([{"lossless": lossless(pit_cold=1e-6, real_divergences=2)}], [{"lossless": lossless()}])
    markdown, page = _report(results, tmp_path)
    analysis = Comparison.from_dict(results[ANALYSIS_KEY])
    assert analysis.workloads["lossless"] == "run" and "lossless_pit" in analysis.metrics
    assert {metric: {case: row.verdict for case, row in _rows(analysis, metric).items()}
            for metric in ("lossless_pit", "lossless_greedy", "lossless_mode_rate")} == {
        "lossless_pit": {"t=1-top_p=1": "equivalent", "t=0.7-top_p=0.9": "worse"},
        "lossless_greedy": {"t=0-top_p=1": "worse"},
        "lossless_mode_rate": {"pooled over t=1-top_p=1": "equivalent"}}
    assert not _rows(analysis, "lossless_acceptance_betting")  # not applicable: no per-step acceptance stats
    line = next(line.text for line in verdict_lines(Document.from_dict(results)) if line.arm == "nofix" and line.family == "lossless")
    assert line.startswith("**nofix** · lossless: **worse** on PIT, greedy equality") and "4 of 6 test results passed" in line
    assert "## Lossless" in markdown
    assert "| PIT calibration | t=0.7-top_p=0.9 | FAIL (p 1e-06) | pass (p 0.3) | **worse** |" in markdown
    assert "| greedy equality | t=0-top_p=1 | FAIL (2 real divergences) | pass (0 real divergences) | **worse** |" in markdown
    assert "<h2>Lossless</h2>" in page and "FAIL (p 1e-06)" in page
    stored = {(m.name, m.case_id): m for m in _history(results)["nofix"]}
    pit = stored[("lossless_pit", "t=0.7-top_p=0.9")]
    assert (pit.value, pit.samples, pit.direction) == (0.0, [{"repeat": 1, "k": 0, "n": 1}], "higher")
    assert stored[("lossless_greedy", "t=0-top_p=1")].value == 0.0 and stored[("lossless_two_sample", "t=1-top_p=1")].value == 1.0


def test_the_history_trends_a_lossless_pass_rate(tmp_path: Path) -> None:
    with HistoryStore.open(str(tmp_path / "history.sqlite")) as store:
        for night, p_value in enumerate((0.3, 1e-6), start=1):
            results = two_arms([{"lossless": lossless(pit_cold=p_value)}], [{"lossless": lossless()}])
            for item in items_from_results(upgraded_document(results), arms=["nofix"], date=f"2026-12-0{night}", node="test"):
                store.add(item)
        trends = analyse(store, metrics=["lossless_pit"])
    trend = next(t for t in trends.series[0].trends if t.case_id == "t=0.7-top_p=0.9")
    assert [point.value for point in trend.points] == [1.0, 0.0]
    assert (trend.label, trend.direction) == ("PIT calibration", "higher")
    assert display_unit(trend.unit) == (100.0, "%")  # drawn in percent of repeats passed


@pytest.mark.parametrize(("candidate_p", "baseline_p", "expected"), [
    (1e-6, 0.3, "worse"),  # failed where the baseline passed
    (0.3, 0.4, "equivalent"),  # both passed
    (1e-6, 1e-5, "inconclusive"),  # both failed: the flags tell the arms nothing apart
    (0.3, 1e-6, "better"),
])
def test_a_lossless_failure_against_a_passing_baseline_is_worse_and_equal_arms_are_not(
        candidate_p: float, baseline_p: float, expected: str) -> None:
    analysis = compare_arms(Document.from_dict(two_arms([{"lossless": lossless(pit_cold=candidate_p)}], [{"lossless": lossless(pit_cold=baseline_p)}])))
    row = _rows(analysis, "lossless_pit")["t=0.7-top_p=0.9"]
    assert row.verdict == expected and row.verdict_by_rule and row.p_adjusted is None  # the flags decide: no test, no Holm
    assert row.note.startswith(f"candidate {'pass' if candidate_p >= ALPHA else 'FAIL'} (p ")
    assert _rows(analysis, "lossless_pit")["t=1-top_p=1"].verdict == "equivalent"


def test_lossless_arms_mixed_over_repeats_go_to_fishers_exact_test() -> None:
    candidate = [{"lossless": lossless(pit_cold=p)} for p in (0.3, 1e-6, 1e-6, 1e-6)]
    baseline = [{"lossless": lossless(pit_cold=p)} for p in (0.3, 0.3, 0.3, 1e-6)]
    row = _rows(compare_arms(Document.from_dict(two_arms(candidate, baseline))), "lossless_pit")["t=0.7-top_p=0.9"]
    assert row.test.startswith("Fisher's exact test") and row.p_value == pytest.approx(0.4857, abs=1e-4)  # 1/4 vs 3/4 passed
    assert row.p_adjusted is not None and not row.verdict_by_rule and row.verdict == "inconclusive"
    assert (flag_verdict(1, 4, 3, 4), flag_verdict(4, 4, 4, 4), flag_verdict(3, 4, 4, 4)) == (None, "equivalent", "worse")


# ---------------------------------------------------------------- integrity


def test_integrity_reaches_the_verdict_the_report_and_the_history(tmp_path: Path) -> None:
    results = two_arms([{"integrity_checks": integrity(stop_token=3)}], [{"integrity_checks": integrity()}])
    markdown, page = _report(results, tmp_path)
    analysis = Comparison.from_dict(results[ANALYSIS_KEY])
    assert analysis.workloads["integrity"] == "run"
    assert _rows(analysis, "integrity_violations")["all checks"].verdict == "worse"
    assert set(_rows(analysis, "integrity_check_violations")) == {"stop_token"}  # checks that fired in neither arm: no row
    lines = {line.arm: line.text for line in verdict_lines(Document.from_dict(results)) if line.family == "integrity"}
    assert lines == {"nofix": "**nofix** · integrity: **worse** on violations, violations per check — "
                              "3 violations in 400 checked answers (stop_token 3)",
                     "fix": "**fix** (baseline) · integrity: 0 violations in 400 checked answers"}
    assert "## Integrity" in markdown and "| stop_token | 3 in 400 answers | 0 in 400 answers | **worse** |" in markdown
    assert "<h2>Integrity</h2>" in page and "3 in 400 answers" in page
    stored = {(m.name, m.case_id): m for m in _history(results)["nofix"]}
    assert stored[("integrity_violations", "all checks")].samples == [{"repeat": 1, "events": 3, "exposure": 400.0}]
    assert stored[("integrity_check_violations", "stop_token")].k == 3
    assert stored[("integrity_check_violations", "completion_tokens")].k == 0  # every check is trended, fired or not


def test_integrity_violations_rising_from_zero_are_worse_and_equal_arms_are_not() -> None:
    def total(candidate: dict[str, int], baseline: dict[str, int]) -> ComparisonRow:
        analysis = compare_arms(Document.from_dict(two_arms([{"integrity_checks": integrity(**candidate)}], [{"integrity_checks": integrity(**baseline)}])))
        return _rows(analysis, "integrity_violations")["all checks"]

    rise = total({"finish_reason": 1}, {})
    assert rise.verdict == "worse" and rise.verdict_by_rule and rise.p_value == 1.0  # one violation is enough; no test needed
    clean = total({}, {})
    assert clean.shown_verdict() == "none in either arm" and clean.p_value is None
    same = total({"retokenize": 5}, {"retokenize": 5})
    assert same.verdict != "worse" and not same.verdict_by_rule and same.p_adjusted == 1.0  # both have counts: the exact test
    more = total({"retokenize": 40}, {"retokenize": 2})
    assert more.verdict == "worse" and not more.verdict_by_rule and more.p_adjusted < 0.05


def test_fail_on_reads_a_verdict_its_rule_decided() -> None:
    analysis = compare_arms(Document.from_dict(two_arms([{"integrity_checks": integrity(stop_token=1), "lossless": lossless(pit_cold=1e-6)}],
                                     [{"integrity_checks": integrity(), "lossless": lossless()}])))
    outcome = evaluate_fail_on("integrity_violations:worse,lossless_pit:worse,integrity_violations:any", analysis)
    assert [trigger.rule for trigger in outcome.triggered] == ["integrity_violations:worse", "lossless_pit:worse",
                                                               "integrity_violations:any"]
    assert "by its verdict rule" in outcome.triggered[0].reason and not outcome.unevaluated


def test_runs_without_lossless_or_integrity_describe_neither() -> None:
    analysis = compare_arms(Document.from_dict(two_arms([{}], [{}])))
    assert list(analysis.families) == ["cases", "gsm8k", "bench"] and list(analysis.workloads) == ["gsm8k", "bench"]
    assert not [name for name in analysis.metrics if name.startswith(("lossless", "integrity"))]


# ---------------------------------------------------------------- a family registered by a test


@dataclass(frozen=True)
class StubRun:
    score: float


def _stub_records(repeat: Repeat) -> list[FamilyRecord]:
    written = workloads_of(repeat).part("stub")
    return [FamilyRecord("whole run", None, None, StubRun(float(written["score"])))] if isinstance(written, dict) else []


def _score(run: StubRun) -> float:
    return run.score


def _lower_is_worse(metric: Metric, cand: CaseRuns, base: CaseRuns, threshold: float, row: ComparisonRow) -> Pending | None:
    candidate, baseline = run_values(cand, metric)[0][1], run_values(base, metric)[0][1]
    row.update(candidate_value=candidate, baseline_value=baseline, test="lower score = worse")
    return Pending(row, candidate - baseline, (0.0, 0.0), threshold, True, ruled="worse" if candidate < baseline else "equivalent")


def _stub_state(view: FamilyView, arm: str) -> str:
    runs = view.cases[arm].get("whole run")
    return f"score {runs.runs[0][1].score:g}" if runs else ""


def _stub_section(view: FamilyView) -> ReportSection:
    rows = [[arm, _stub_state(view, arm)] for arm in view.arm_order]
    return ReportSection.written(title="Stub scores", paragraphs=["One score per arm."],
                                 tables=[ReportTable.written(title="Scores", header=["arm", "score"], rows=rows)])


def _stub_figures(view: FamilyView) -> list[FigureSpec]:
    """An ECDF of each arm's scores: declared by the family, drawn by the report's generic renderer."""
    series = {arm: [runs.runs[0][1].score] for arm in view.arm_order if (runs := view.cases[arm].get("whole run"))}
    return [FigureSpec(kind=ECDF, file="stub_scores.png", title="Stub scores drawn", caption="One score per arm.", place=35,
                       when_run=True, absent_note="Stub figure: no scores.", x_label="score", y_label="fraction of arms",
                       unit="points", panels=[EcdfPanel(title="Stub ECDF", series=series)])]


def _stub_caveat(view: FamilyView) -> FamilyCaveat:
    return FamilyCaveat("The stub's scores are made up.", "made up")


STUB = WorkloadFamily(
    name="stub", label="stub family", results_key="workloads.stub", suite_module="test_stub", records=_stub_records,
    metrics=(Metric("stub_score", "stub score", "points", "higher", 0.0, "difference", "stub_lower_is_worse", "stub", "run_value",
                    _score, "stub score", "plain"),),
    verdict_rules=(VerdictRule("stub_lower_is_worse", "a lower score is worse", _lower_is_worse),),
    state=_stub_state, section=_stub_section, figures=_stub_figures, caveat=_stub_caveat)


@pytest.fixture
def stub_family() -> Iterator[WorkloadFamily]:
    with registered(STUB):
        yield STUB


def test_a_family_registered_in_a_test_reaches_the_verdict_the_report_and_the_history(stub_family: WorkloadFamily,
                                                                                      tmp_path: Path) -> None:
    results = two_arms([{"stub": {"score": 3.0}}], [{"stub": {"score": 5.0}}])
    markdown, page = _report(results, tmp_path)
    analysis = Comparison.from_dict(results[ANALYSIS_KEY])
    assert _rows(analysis, "stub_score")["whole run"].verdict == "worse"
    assert analysis.workloads["stub"] == "run" and analysis.metrics["stub_score"].extra["test"] == "a lower score is worse"
    assert "- **nofix** · stub family: **worse** on stub score (whole run) — score 3" in markdown
    assert "- **fix** (baseline) · stub family: score 5" in markdown
    assert "## Stub scores" in markdown and "### Scores" in markdown and "| nofix | score 3 |" in markdown
    assert "<h2>Stub scores</h2>" in page and "<h3>Scores</h3>" in page
    # its declared figure, drawn from the analysis (as results.json holds it) by the generic ECDF renderer, and its caveat
    assert "![Stub scores drawn](stub_scores.png)" in markdown and (tmp_path / "stub_scores.png").stat().st_size > 0
    assert analysis.families["stub"].figures[0].panels[0].series == {"nofix": [3.0], "fix": [5.0]}
    assert "The stub's scores are made up." in markdown and analysis.families["stub"].caveat_tag == "made up"
    assert [(m.name, m.case_id, m.value) for m in _history(results)["nofix"]] == [("stub_score", "whole run", 3.0)]


def test_the_registry_refuses_a_family_that_clashes(stub_family: WorkloadFamily) -> None:
    with pytest.raises(ValueError, match="already registered"):
        register(stub_family)
    clash = WorkloadFamily(name="other", label="other", results_key="workloads.other", suite_module="test_other",
                           records=_stub_records, metrics=stub_family.metrics, verdict_rules=(), state=_stub_state)
    with pytest.raises(ValueError, match="metric 'stub_score'"):
        register(clash)
