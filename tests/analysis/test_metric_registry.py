"""The metric registry and what reads it: the "suspect" verdict, its --fail-on rule and its report row,
the run-level engine shared by compare_arms and the calibration scripts, and the report's copies."""

from __future__ import annotations

import json

import pytest

from specsuite.analysis import metric_registry, verdicts
from specsuite.analysis.fail_on import evaluate_fail_on, parse_fail_on
from specsuite.analysis.metric_registry import BY_NAME, METRICS, REGISTRY
from specsuite.analysis.verdicts import compare_arms, describe_run_level
from specsuite.errors import SpecsuiteError
from specsuite.families.registry import verdict_rule
from specsuite.history.metrics import direction_of
from specsuite.reports import document
from specsuite.reports.blocks import Bullets, Paragraph, Table
from specsuite.reports.document import ANALYSIS_KEY
from specsuite.reports.overview import build_report
from specsuite.results.types import Comparison, ComparisonRow, Document
from tests.helpers.ab_results import arm_repeats, bench_run, make_results

FAST = 4.2  # the candidate's mean accept length; the baseline's is 2.4
T1 = "t=1-top_p=1"


def _fallback_only(repeats: list[dict]) -> list[dict]:
    """Keep the fallback-id events of every case and clear the other detectors: fallback ids alone."""
    for repeat in repeats:
        for case in repeat["cases"]:
            for name in ("invalid_id", "padded_row_id", "stray_char"):
                case["detectors"][name]["count"] = 0
            case["server_counters"] = {}
    return repeats


def _results(candidate_invalid_rate: float) -> dict:
    candidate = arm_repeats(7, invalid_rate=candidate_invalid_rate, accept_mean=FAST)
    baseline = arm_repeats(1007, invalid_rate=0.0, accept_mean=2.4)
    return make_results({"candidate": _fallback_only(candidate), "fix": _fallback_only(baseline)})


def _rows(analysis: Comparison, metric: str) -> dict[str, ComparisonRow]:
    return {row.case_id: row for row in analysis.comparisons if row.metric == metric}


@pytest.fixture(scope="module")
def fallback_arm() -> dict:
    results = _results(0.015)
    results[ANALYSIS_KEY] = compare_arms(Document.from_dict(results)).to_dict()  # as results.json holds it
    return results


def test_higher_accept_length_with_fallback_ids_is_suspect_not_better(fallback_arm: dict) -> None:
    analysis = Comparison.from_dict(fallback_arm[ANALYSIS_KEY])  # the stored analysis, read typed
    assert _rows(analysis, "fallback_ids")[T1].verdict == "worse"
    assert all(_rows(analysis, name)[T1].verdict != "worse" for name in ("invalid_ids", "padded_row_ids", "stray_per_1200"))
    accept = _rows(analysis, "accept_length")
    assert accept and {row.verdict for row in accept.values()} == {"suspect"}
    row = accept[T1]
    assert row.effect.ci[0] > 0 and row.p_adjusted < 0.05  # it would have been "better"
    assert row.suspect_because == {"fallback_ids": ["t=0.6-top_p=0.95", T1]}
    assert "signature of corrupt draft probabilities" in row.note and "fallback_ids" in row.note and row.note.count(". ") == 0


def test_clean_candidate_with_higher_accept_length_is_unverified_not_suspect() -> None:
    # No corruption sign: not suspect.  No lossless test in either arm: the rise is not shown to be a speed-up
    # (tests/compare/test_acceptance_guard.py has the arms whose losslessness was checked).
    analysis = compare_arms(Document.from_dict(_results(0.0)))
    assert {row.verdict for row in _rows(analysis, "accept_length").values()} == {"unverified"}
    assert all(not row.suspect_because for row in analysis.comparisons)


def test_fail_on_suspect_fires_only_on_the_suspect_arm(fallback_arm: dict) -> None:
    for rules in ("accept_length:suspect", "suspect"):
        outcome = evaluate_fail_on(rules, Comparison.from_dict(fallback_arm[ANALYSIS_KEY]))
        assert outcome.failed and outcome.triggered[0].rule == rules
        assert "suspect" in outcome.triggered[0].reason and "fallback_ids" in outcome.triggered[0].reason
    clean = evaluate_fail_on("accept_length:suspect", compare_arms(Document.from_dict(_results(0.0))))
    assert not clean.failed and not clean.unevaluated
    assert not evaluate_fail_on("accept_length:worse", Comparison.from_dict(fallback_arm[ANALYSIS_KEY])).failed  # suspect is not worse
    with pytest.raises(SpecsuiteError, match="'suspect' applies to accept_length"):
        parse_fail_on("invalid_ids:suspect")


def test_report_passes_the_suspect_verdict_and_its_note_through(fallback_arm: dict) -> None:
    blocks = build_report(Document.from_dict(fallback_arm), [], []).blocks
    cells = [cell for block in blocks if isinstance(block, Table) for row in block.rows for cell in row]
    assert any(cell.startswith("**suspect**") for cell in cells)  # before/after verdict column and verdict table
    counts = next(block.text for block in blocks if isinstance(block, Paragraph) and " worse, " in block.text)
    assert counts.startswith("2 worse, 3 suspect, 0 better, ")  # fallback ids at T=0.6 and T=1; accept length at all three
    # One line per suspect metric and pair of arms, naming its cases (the why is said once, under the verdict lines).
    # (The verdict section's explanation of "suspect" names no pair of arms.)
    notes = [item for block in blocks if isinstance(block, Bullets) for item in block.items if item.startswith("**suspect**:") and " vs " in item]
    assert len(notes) == 1 and "in 3 case(s)" in notes[0] and "fallback_ids" in notes[0]


def test_every_metric_has_a_verdict_rule_a_test_and_json_facts() -> None:
    assert set(METRICS) == {metric.name for metric in REGISTRY} and len(METRICS) == len(REGISTRY)
    assert all(verdict_rule(metric.statistic).test for metric in REGISTRY)  # each cites a registered rule, described
    table = metric_registry.metric_table().to_dict()
    json.dumps(table, allow_nan=False)
    assert set(table["report_rows"]) <= set(METRICS) and set(table["spread_rows"]) <= set(METRICS)
    assert verdicts.check_thresholds(None) == metric_registry.default_thresholds() == {m.name: m.threshold for m in REGISTRY}
    assert direction_of(BY_NAME["accept_length"]) == "either" and direction_of(BY_NAME["output_throughput"]) == "higher"
    assert [m.name for m in REGISTRY if m.suspect_when_better] == ["accept_length"]


def test_the_reports_read_the_registrys_display_facts_from_the_analysis() -> None:
    from specsuite.reports import overview

    table = metric_registry.metric_table().to_dict()
    written = {"metrics": table["metrics"], "spread_rows": table["spread_rows"]}
    analysis = Comparison.from_dict(written)
    for metric in REGISTRY:
        assert document.kind_of(analysis, metric.name) == metric.report_format
        assert document.metric_fact(analysis, metric.name, "short") == (metric.short or metric.label)
        assert document.metric_fact(analysis, metric.name, "plot_title") == (metric.plot_title or metric.label)
        assert document.metric_fact(analysis, metric.name, "axis_label") == (metric.axis_label or metric.unit)
    written["metrics"]["invalid_ids"] = {**written["metrics"]["invalid_ids"], "short": "bad ids"}
    assert overview._short(Comparison.from_dict(written), "invalid_ids") == "bad ids"  # no copy in specsuite/reports/: the analysis decides
    older = Comparison.from_dict({"metrics": {"invalid_ids": {"label": "invalid ids", "unit": "per generated token"}}})
    assert document.metric_fact(older, "invalid_ids", "short") == "invalid ids"
    assert document.metric_fact(older, "invalid_ids", "axis_label") == "per generated token"
    assert document.metric_fact(Comparison(), "new_metric", "plot_title") == "new metric"


def test_the_summary_tables_counter_names_are_the_contracts() -> None:
    from specsuite.reports import summary_table
    from specsuite.server import refserver_contract

    assert summary_table.NONFINITE_COUNTER == refserver_contract.NONFINITE_ENTRIES
    assert summary_table.FALLBACK_COUNTER == refserver_contract.FALLBACK_EMISSIONS


def test_bench_rows_with_repeats_carry_the_rank_pair_and_read_as_one_line() -> None:
    import numpy as np

    rng = np.random.default_rng(4)
    arms = {name: [{"cases": [], "workloads": {"bench": bench_run(rng, itl, 200.0, requests=4, tokens=10)}} for _ in range(4)]
            for name, itl in (("slow", 10.5), ("base", 10.0))}
    analysis = compare_arms(Document.from_dict(make_results(arms)))
    row = _rows(analysis, "itl_median")["t=0-top_p=1"]
    assert row.test == "Welch t on log run-level values + TOST" and row.rank.p_value is not None
    assert BY_NAME["itl_median"].statistic == "run_level" and row.equivalence.ci is not None
    text = describe_run_level(row)
    assert text.startswith("itl_median t=0-top_p=1: +") and "rank-based: Hodges-Lehmann" in text and row.verdict in text
