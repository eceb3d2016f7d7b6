"""compare_arms: verdicts, Holm over the family, MDEs and repeat spread, on real and synthetic results."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from specsuite.analysis.metric_registry import METRICS
from specsuite.analysis.verdicts import compare_arms
from specsuite.errors import SpecsuiteError
from specsuite.results.store import load_results
from specsuite.results.types import Comparison, ComparisonRow, Document
from specsuite.stats import holm
from tests.helpers.ab_results import make_results, nofix_vs_fix, null_pair, with_workloads

REAL = Path(__file__).parents[1] / "data" / "ab_results" / "nofix_vs_fix_smoke.json"


def rows(out: Comparison, metric: str, case_id: str | None = None) -> list[ComparisonRow]:
    return [c for c in out.comparisons if c.metric == metric and (case_id is None or c.case_id == case_id)]


@pytest.fixture(scope="module")
def real() -> Comparison:
    return compare_arms(load_results(REAL))


def test_real_run_nofix_is_worse_at_t1_on_ids_fallbacks_and_strays(real: Comparison) -> None:
    assert real.candidates == ["nofix"] and real.baseline == "fix"
    for case_id in ("t=1-top_p=1", "t=1-top_p=0.95"):
        for metric in ("invalid_ids", "fallback_ids", "sampler_fallbacks", "stray_per_1200"):
            (row,) = rows(real, metric, case_id)
            assert row.verdict == "worse", (metric, case_id)
            assert row.p_adjusted < 1e-3
            assert row.candidate_value > row.baseline_value == 0
        (accept,) = rows(real, "accept_length", case_id)
        assert accept.candidate_value > accept.baseline_value
        assert accept.effect.ci[0] > 0


def test_real_run_greedy_case_has_no_worse_verdict(real: Comparison) -> None:
    greedy = [c for c in real.comparisons if c.case_id == "t=0-top_p=1"]
    assert greedy and all(c.verdict != "worse" for c in greedy)


def test_output_is_strict_json_with_every_field(real: Comparison) -> None:
    json.dumps(real.to_dict(), allow_nan=False)
    for row in real.comparisons:
        assert {"metric", "case_id", "candidate", "baseline", "candidate_value", "baseline_value", "unit", "effect",
                "p_value", "p_adjusted", "mde", "verdict", "test", "n"} <= row.to_dict().keys()
        assert row.verdict in ("better", "worse", "suspect", "equivalent", "inconclusive")
        assert row.mde.value is not None or row.mde.note
    assert real.workloads == {"gsm8k": "not run", "bench": "not run"}


def test_holm_is_applied_over_the_whole_family(real: Comparison) -> None:
    tested = [c for c in real.comparisons if c.p_value is not None]
    expected = holm([c.p_value for c in tested], alpha=real.family_alpha).adjusted
    assert [c.p_adjusted for c in tested] == pytest.approx(list(expected))
    assert all(c.p_adjusted >= c.p_value for c in tested)
    assert len({c.metric for c in tested}) > 3  # one family across metrics, not per metric


def test_synthetic_nofix_gives_worse_invalid_ids_with_tiny_p() -> None:
    out = compare_arms(Document.from_dict(nofix_vs_fix()))
    (row,) = rows(out, "invalid_ids", "t=1-top_p=1")
    assert row.verdict == "worse" and row.p_value < 1e-3
    assert row.events.candidate > 0 and row.events.baseline == 0


def test_identical_arms_give_no_worse_or_better() -> None:
    results = nofix_vs_fix()
    results["arms"]["fix"] = copy.deepcopy(results["arms"]["nofix"])
    out = compare_arms(Document.from_dict(results))
    assert out.comparisons
    assert {c.verdict for c in out.comparisons} <= {"equivalent", "inconclusive"}
    assert all(c.p_value == pytest.approx(1.0) for c in out.comparisons if c.metric != "accept_length")


def test_null_ab_over_twenty_seeds_rarely_if_ever_says_worse() -> None:
    # Holm keeps the family-wise error near alpha; with practical thresholds "worse" is rarer still.
    seeds_with_worse = sum(any(c.verdict == "worse" for c in compare_arms(Document.from_dict(null_pair(seed))).comparisons)
                           for seed in range(20))
    assert seeds_with_worse <= 2


def test_single_event_over_a_zero_baseline_is_not_significant() -> None:
    results = nofix_vs_fix()
    for repeat in results["arms"]["nofix"]["repeats"]:
        for case in repeat["cases"]:
            case["detectors"]["invalid_id"]["count"] = 1 if case["temperature"] == 1.0 else 0
    (row,) = rows(compare_arms(Document.from_dict(results)), "invalid_ids", "t=1-top_p=1")
    assert row.verdict == "inconclusive" and row.p_value > 0.05


def test_practical_threshold_blocks_a_significant_but_small_change() -> None:
    results = nofix_vs_fix()  # nofix's higher accept length is "suspect": it is "better" held against its invalid ids
    assert rows(compare_arms(Document.from_dict(results)), "accept_length", "t=1-top_p=1")[0].verdict == "suspect"
    loose = compare_arms(Document.from_dict(results), thresholds={"accept_length": 5.0})
    assert rows(loose, "accept_length", "t=1-top_p=1")[0].verdict not in ("better", "suspect")


@pytest.mark.parametrize("kwargs, fragment", [({"thresholds": {"latency": 0.1}}, "unknown threshold metric"),
                                              ({"thresholds": {"itl_median": -1}}, "must be a number"),
                                              ({"alpha": 1.5}, "alpha")])
def test_bad_settings_raise_one_line_errors(kwargs: dict, fragment: str) -> None:
    with pytest.raises(SpecsuiteError, match=fragment):
        compare_arms(Document.from_dict(nofix_vs_fix()), **kwargs)


def test_not_a_results_dict_is_refused() -> None:
    with pytest.raises(SpecsuiteError, match="arms"):
        compare_arms(Document.from_dict({"status": "complete"}))


def test_missing_baseline_gives_estimates_and_a_note_but_no_comparisons() -> None:
    results = nofix_vs_fix()
    del results["arms"]["fix"]
    out = compare_arms(Document.from_dict(results))
    assert out.comparisons == [] and out.baseline is None
    assert any("fix" in note for note in out.notes)
    assert any(e.arm == "nofix" and e.metric == "invalid_ids" for e in out.estimates)


def test_gsm8k_drop_is_worse_and_no_drop_is_not() -> None:
    out = compare_arms(Document.from_dict(with_workloads(accuracy_drop=0.12)))
    (acc,) = rows(out, "gsm8k_accuracy")
    assert acc.verdict == "worse" and acc.test.startswith("exact McNemar")
    assert acc.n.candidate == 300 and acc.effect.ci[1] < 0
    assert rows(out, "gsm8k_invalid")[0].verdict == "worse"
    same = compare_arms(Document.from_dict(with_workloads(accuracy_drop=0.0)))
    assert rows(same, "gsm8k_accuracy")[0].verdict != "worse"
    assert rows(same, "gsm8k_accuracy")[0].p_value == pytest.approx(1.0)


def test_bench_single_run_uses_per_token_itls() -> None:
    slow = rows(compare_arms(Document.from_dict(with_workloads(itl_slowdown=0.05))), "itl_median")[0]
    assert slow.verdict == "worse" and "bootstrap" in slow.test
    assert 0.03 < slow.effect.value < 0.07 and slow.effect.ci[0] > 0.01
    even = rows(compare_arms(Document.from_dict(with_workloads(itl_slowdown=0.0))), "itl_median")[0]
    assert even.verdict != "worse"
    throughput = rows(compare_arms(Document.from_dict(with_workloads())), "output_throughput")[0]
    assert throughput.p_value is None and throughput.verdict == "inconclusive" and "repeats" in throughput.note


def test_repeats_compare_run_level_values_and_report_spread() -> None:
    out = compare_arms(Document.from_dict(with_workloads(repeats=3)))
    accept = rows(out, "accept_length", "t=1-top_p=1")[0]
    assert accept.n.to_dict() == {"candidate": 3, "baseline": 3, "unit": "repeats"} and "run-level" in accept.test
    assert accept.mde.repeats_needed >= 2
    throughput = rows(out, "output_throughput")[0]
    assert throughput.verdict == "worse" and "TOST" in throughput.test
    spread = out.repeat_spread["accept_length"]["t=1-top_p=1"]
    for arm in ("nofix", "fix"):
        entry = spread[arm]
        assert len(entry.values) == 3 and entry.sd > 0 and entry.min <= entry.mean <= entry.max


def test_null_with_repeats_has_no_worse_verdict() -> None:
    for seed in range(3):
        assert all(c.verdict != "worse" for c in compare_arms(Document.from_dict(null_pair(seed, repeats=3))).comparisons)


def test_counter_metrics_appear_only_when_the_server_exports_them() -> None:
    results = nofix_vs_fix()
    assert rows(compare_arms(Document.from_dict(results)), "nonfinite_draft_probs")
    for arm in results["arms"].values():
        for repeat in arm["repeats"]:
            for case in repeat["cases"]:
                case["server_counters"] = {}
    out = compare_arms(Document.from_dict(results))
    assert not rows(out, "nonfinite_draft_probs") and not rows(out, "sampler_fallbacks")
    assert {c.metric for c in out.comparisons} <= set(METRICS)


def test_failed_repeat_without_cases_is_skipped() -> None:
    results = make_results({"nofix": nofix_vs_fix()["arms"]["nofix"]["repeats"] + [{"cases": [], "workloads": {}}],
                            "fix": nofix_vs_fix()["arms"]["fix"]["repeats"]})
    (row,) = rows(compare_arms(Document.from_dict(results)), "invalid_ids", "t=1-top_p=1")
    assert row.verdict == "worse"
