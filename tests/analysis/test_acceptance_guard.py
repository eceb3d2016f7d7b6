"""A higher accept length is a speed-up only where losslessness was checked (specsuite/analysis/verdicts.py
`_guard_acceptance`): an arm that accepts drafts more often than p/q allows shows no corruption sign, so without a
lossless test it would read "better".  Here: the over-accepting arm (fails the PIT and the mode rate its baseline
passes) is "worse", never "better"; a clean arm whose lossless tests pass keeps "better"; a rise no lossless test
compared is "unverified"; the recycled-draft_probs bug's "suspect" keeps its precedence; and --profile nightly fails the
over-accepting arm through its absolute lossless rule."""

from __future__ import annotations

from typing import Any

from specsuite.analysis.absolute import judge_absolute
from specsuite.analysis.fail_on import evaluate_fail_on, nightly_fail_on
from specsuite.analysis.verdicts import UNVERIFIED, compare_arms
from specsuite.results.types import Comparison, ComparisonRow, Document
from tests.helpers.ab_results import arm_repeats, make_results

FAST, BASE = 4.2, 2.4  # mean accept lengths: the candidate accepts more
SETTING = "t=1-top_p=1"


def lossless_workload(*, passed: bool) -> dict[str, Any]:
    """A session's `workloads.lossless` at T=1: the PIT and the directed tests, passed or failed together."""
    p_value = 0.4 if passed else 1e-12
    return {"pit": {SETTING: {"setting": {"temperature": 1.0, "top_p": 1.0}, "p_value": p_value, "passed": passed}},
            "directed": {"settings": [SETTING], "top_token_rate": {"p_value": p_value, "passed": passed},
                         "acceptance_betting": {"applicable": False}}}


def failed_tests() -> dict[str, Any]:
    """The JUnit outcome of a session whose lossless tests failed (what the absolute gate reads)."""
    return {"failed": [{"test": f"test_lossless::{name}", "module": "test_lossless", "function": name, "kind": "failed",
                        "message": "AssertionError: not calibrated"}
                       for name in ("test_pit_calibration", "test_mode_not_overdrawn")]}


def results(*, candidate: bool | None, baseline: bool | None, invalid_rate: float = 0.0) -> Document:
    """Candidate (faster acceptance) against fix; each arm's lossless tests passed (True), failed (False) or not run (None)."""
    arms = {}
    for name, seed, accept, outcome, rate in (("candidate", 7, FAST, candidate, invalid_rate), ("fix", 1007, BASE, baseline, 0.0)):
        repeats = arm_repeats(seed, invalid_rate=rate, accept_mean=accept)
        if outcome is not None:
            repeats[0]["workloads"]["lossless"] = lossless_workload(passed=outcome)
            if not outcome:
                repeats[0]["tests"] = failed_tests()
        arms[name] = repeats
    return Document.from_dict(make_results(arms))


def accept_rows(analysis: Comparison) -> dict[str, ComparisonRow]:
    return {row.case_id: row for row in analysis.comparisons if row.metric == "accept_length"}


def sampled(rows: dict[str, ComparisonRow]) -> list[ComparisonRow]:
    return [row for case_id, row in rows.items() if not case_id.startswith("t=0-")]


def test_an_over_accepting_arm_is_worse_not_better() -> None:
    analysis = compare_arms(results(candidate=False, baseline=True))
    lossless = {row.metric: row.verdict for row in analysis.comparisons if row.metric.startswith("lossless_")}
    assert lossless == {"lossless_pit": "worse", "lossless_mode_rate": "worse"}
    accept = accept_rows(analysis)
    assert accept and {row.verdict for row in accept.values()} == {"worse"}  # never "better"
    row = accept[SETTING]
    assert row.effect.ci[0] > 0 and row.p_adjusted < 0.05  # higher, significantly: what read "better" before
    assert "over-accepting sampler" in row.note and "PIT t=1-top_p=1" in row.note and "mode rate" in row.note


def test_the_nightly_gate_fails_the_over_accepting_arm() -> None:
    document = results(candidate=False, baseline=True)
    gate = judge_absolute(document)
    assert [(finding.arm, finding.rule) for finding in gate.findings] == [("candidate", "lossless")]
    assert "test_pit_calibration" in gate.findings[0].reason
    # The accept length's "worse" is a correctness verdict here, not a speed one: --fail-on accept_length:worse names it.
    outcome = evaluate_fail_on("accept_length:worse", compare_arms(document))
    assert outcome.failed and "worse" in outcome.triggered[0].reason
    assert not evaluate_fail_on(nightly_fail_on(), compare_arms(results(candidate=True, baseline=True))).failed


def test_a_clean_faster_arm_whose_losslessness_was_checked_stays_better() -> None:
    analysis = compare_arms(results(candidate=True, baseline=True))
    assert {row.verdict for row in accept_rows(analysis).values()} == {"better"}
    assert {row.verdict for row in analysis.comparisons if row.metric.startswith("lossless_")} == {"equivalent"}
    assert not judge_absolute(results(candidate=True, baseline=True)).failed


def test_a_rise_no_lossless_test_compared_is_unverified() -> None:
    for candidate, baseline, why in ((None, None, "no lossless test ran in both arms"),
                                     (True, None, "no lossless test ran in both arms"),
                                     (False, False, "undecided lossless comparisons: PIT t=1-top_p=1 inconclusive")):
        accept = accept_rows(compare_arms(results(candidate=candidate, baseline=baseline)))
        assert {row.verdict for row in sampled(accept)} == {UNVERIFIED}, (candidate, baseline)
        assert why in accept[SETTING].note and "losslessness was not checked" in accept[SETTING].note


def test_the_corrupt_draft_probabilities_suspect_keeps_its_precedence() -> None:
    accept = accept_rows(compare_arms(results(candidate=True, baseline=True, invalid_rate=0.015)))
    assert {row.verdict for row in accept.values()} == {"suspect"}
