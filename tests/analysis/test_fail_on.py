"""--fail-on: parsing, one-line errors naming the bad term, and which rules fire on which data."""

from __future__ import annotations

import pytest

from specsuite.analysis.fail_on import evaluate_fail_on, parse_fail_on
from specsuite.analysis.verdicts import compare_arms
from specsuite.errors import SpecsuiteError
from specsuite.results.types import Comparison, Document
from tests.helpers.ab_results import nofix_vs_fix, null_pair, with_workloads


@pytest.fixture(scope="module")
def nofix() -> Comparison:
    return compare_arms(Document.from_dict(nofix_vs_fix()))


@pytest.fixture(scope="module")
def null() -> Comparison:
    return compare_arms(Document.from_dict(null_pair(7)))


def fired(expression: str, comparison: Comparison) -> list[str]:
    return [t.rule for t in evaluate_fail_on(expression, comparison).triggered]


def test_parse_the_documented_example() -> None:
    rules = parse_fail_on("invalid_ids:any, stray_per_1200:worse,itl_median:+1%,gsm8k_accuracy:-2pt")
    assert [(r.metric, r.kind) for r in rules] == [("invalid_ids", "any"), ("stray_per_1200", "worse"),
                                                  ("itl_median", "threshold"), ("gsm8k_accuracy", "threshold")]
    assert rules[2].limit == pytest.approx(0.01) and rules[3].limit == pytest.approx(-0.02)


@pytest.mark.parametrize("expression, bad_term", [
    ("invalid_ids:any,latency:worse", "latency:worse"),
    ("invalid_ids", "invalid_ids"),
    ("accept_length:any", "accept_length:any"),
    ("itl_median:1%", "itl_median:1%"),
    ("itl_median:+1pt", "itl_median:+1pt"),
    ("gsm8k_accuracy:-2%", "gsm8k_accuracy:-2%"),
    ("stray_per_1200:bad", "stray_per_1200:bad"),
    ("itl_median:+0%", "itl_median:+0%"),
])
def test_bad_terms_are_named_in_one_line(expression: str, bad_term: str) -> None:
    with pytest.raises(SpecsuiteError) as error:
        parse_fail_on(expression)
    message = str(error.value)
    assert repr(bad_term) in message and "\n" not in message


@pytest.mark.parametrize("expression", ["", "  ", "invalid_ids:any,,stray_per_1200:worse"])
def test_empty_expressions_and_terms_are_refused(expression: str) -> None:
    with pytest.raises(SpecsuiteError, match="--fail-on"):
        parse_fail_on(expression)


def test_any_and_worse_fire_on_nofix_and_not_on_a_null_pair(nofix: Comparison, null: Comparison) -> None:
    expression = "invalid_ids:any,stray_per_1200:worse,fallback_ids:worse"
    assert fired(expression, nofix) == ["invalid_ids:any", "stray_per_1200:worse", "fallback_ids:worse"]
    assert fired(expression, null) == []
    reason = evaluate_fail_on("invalid_ids:any", nofix).triggered[0].reason
    assert "nofix t=1-top_p=1" in reason and "\n" not in reason


def test_any_checks_the_only_arm_when_there_is_no_baseline() -> None:
    results = nofix_vs_fix()
    del results["arms"]["fix"]
    results["arm_order"], results["baseline_arm"] = ["nofix"], "nofix"
    assert fired("invalid_ids:any", compare_arms(Document.from_dict(results))) == ["invalid_ids:any"]


def test_threshold_rules_use_the_whole_interval() -> None:
    slow = compare_arms(Document.from_dict(with_workloads(itl_slowdown=0.05, accuracy_drop=0.12)))
    assert fired("itl_median:+1%,gsm8k_accuracy:-2pt", slow) == ["itl_median:+1%", "gsm8k_accuracy:-2pt"]
    # A 5 % slowdown does not demonstrate more than +20 %, nor a 12-point drop more than 30 points.
    assert fired("itl_median:+20%,gsm8k_accuracy:-30pt", slow) == []
    even = compare_arms(Document.from_dict(with_workloads(itl_slowdown=0.0, accuracy_drop=0.0)))
    assert fired("itl_median:+1%,gsm8k_accuracy:-2pt", even) == []


def test_rate_thresholds_are_on_the_ratio(nofix: Comparison) -> None:
    # fragment_excess: similar low rates in both arms, so no ratio is demonstrably above 1.5
    assert fired("fragment_excess:+50%", nofix) == []
    # invalid ids over a zero baseline: the ratio interval's lower bound is far above 2
    assert fired("invalid_ids:+100%", nofix) == ["invalid_ids:+100%"]


def test_throughput_drop_with_repeats() -> None:
    out = compare_arms(Document.from_dict(with_workloads(itl_slowdown=0.05, repeats=3)))
    assert fired("output_throughput:-1%", out) == ["output_throughput:-1%"]
    assert fired("output_throughput:+1%", out) == []


def test_rules_without_data_are_reported_unevaluated(nofix: Comparison) -> None:
    outcome = evaluate_fail_on("itl_median:+1%,gsm8k_accuracy:worse,invalid_ids:worse", nofix)
    assert [t.rule for t in outcome.triggered] == ["invalid_ids:worse"]
    assert len(outcome.unevaluated) == 2 and all("no " in line for line in outcome.unevaluated)
    assert outcome.failed and outcome.to_dict()["triggered"][0]["rule"] == "invalid_ids:worse"


def test_a_stored_analysis_gives_the_same_outcome(nofix: Comparison, null: Comparison) -> None:
    """evaluate_fail_on reads the typed Comparison: the one compare_arms returns, or one loaded back from its dict."""
    expression = "invalid_ids:any,stray_per_1200:worse,accept_length:suspect,invalid_ids:+10%"
    for analysis in (nofix, null):
        fresh = evaluate_fail_on(expression, analysis)
        stored = evaluate_fail_on(expression, Comparison.from_dict(analysis.to_dict()))
        assert (stored.triggered, stored.unevaluated) == (fresh.triggered, fresh.unevaluated)
    assert evaluate_fail_on(expression, nofix).triggered  # the comparison is not vacuous: nofix fires
