"""Correctness suite: token validity, stray characters, special fragments and acceptance anomalies
at every point of the sampling grid.

Zero tolerance for ids no tokenizer knows (invalid, padded-row, fallback).  Text symptoms that a
healthy model can also produce now and then (stray `!`, special fragments out of structure,
U+FFFD, loops) are compared with the same
server's greedy (T=0) control by an exact one-sided test, since greedy decoding never reaches the
speculative sampler.  Each failure quotes counts, the rate, its Clopper–Pearson bound and one
offending request.

Acceptance: alone, a server is held only to the accept length's physical bounds; whether it accepts
too much is judged against a baseline arm (`--baseline-url`, the A/B engine's "suspect"), since a
correct rejection sampler's acceptance can rise with temperature.
"""

from __future__ import annotations

import pytest

from harness.compare.verdicts import compare_arms
from harness.results.model import comparison_document
from harness.stats import fisher_exact_2x2, rate_ratio_test
from harness.workloads.correctness.acceptance import accept_length_within_bounds, request_accept_length
from harness.workloads.correctness.workload import CaseResult, SamplingCase

pytestmark = pytest.mark.correctness

def _control(specsuite, case: SamplingCase) -> CaseResult:
    return specsuite.case_result(SamplingCase(0.0, case.top_p if case.greedy else 1.0))


def _describe(result: CaseResult, detector: str, what: str) -> str:
    entry = result.totals.get(detector, {"count": 0, "total": 0, "upper95": 1.0})
    total = entry["total"] or 0
    rate = entry["count"] / total if total else 0.0
    return (f"{what} at {result.case.case_id}: {entry['count']} in {total} {entry.get('unit', 'tokens')} "
            f"(rate {rate:.3%}, 95% upper bound {entry['upper95']:.3%}); example: {result.example(detector)}")


def _assert_zero(result: CaseResult, detector: str, what: str) -> None:
    assert result.count(detector) == 0, _describe(result, detector, what)


def test_requests_succeed(specsuite, sampling_case):
    result = specsuite.case_result(sampling_case)
    assert not result.errors, (f"{len(result.errors)} of {len(result.errors) + len(result.generations)} requests failed "
                               f"at {sampling_case.case_id}: {result.errors[0]}")


def test_no_invalid_token_ids(specsuite, sampling_case):
    """Token validity: no id outside [0, tokenizer length)."""
    result = specsuite.case_result(sampling_case)
    vocab = specsuite.server.vocab
    detail = (f"; padded-row ids {result.count('padded_row_id')}, fallback id {vocab.fallback_id}: {result.count('fallback_id')}"
              f"; tokenizer length {vocab.tokenizer_length}, vocab_size {vocab.vocab_size}")
    assert result.count("invalid_id") == 0, _describe(result, "invalid_id", "token validity: invalid ids") + detail


def test_no_padded_row_ids(specsuite, sampling_case):
    """No id of an untrained padded embedding row, [tokenizer length, vocab_size)."""
    _assert_zero(specsuite.case_result(sampling_case), "padded_row_id", "token validity: padded-row ids")


def test_no_fallback_ids(specsuite, sampling_case):
    """No vocab_size-1, the sampler's fallback when its residual search fails."""
    _assert_zero(specsuite.case_result(sampling_case), "fallback_id", "token validity: sampler fallback ids")


def test_no_empty_decoding_ids(specsuite, sampling_case):
    _assert_zero(specsuite.case_result(sampling_case), "empty_decoding_id", "ids that decode to nothing")


def test_no_nan_finishes(specsuite, sampling_case):
    """SGLang finishes a request with matched "NaN happened" when a sampled id is out of range."""
    _assert_zero(specsuite.case_result(sampling_case), "nan_finish", "'NaN happened' finishes")


def test_token_sources_agree(specsuite, sampling_case):
    """output_ids and the ids inside output_token_logprobs must be the same list."""
    _assert_zero(specsuite.case_result(sampling_case), "token_source_mismatch", "output_ids vs logprob ids mismatches")


def test_special_fragments_not_above_greedy_control(specsuite, sampled_case):
    """`</think>` / `<tool_call>` repeated beyond what the chat structure allows, against T=0
    (a weak greedy model can loop over well-formed blocks; the seed's garbage is far above it)."""
    _rate_not_above_control(specsuite, sampled_case, "fragment_text", "special fragments out of structure")


def _rate_not_above_control(specsuite, case: SamplingCase, detector: str, what: str, cap: float | None = None) -> None:
    result, control = specsuite.case_result(case), _control(specsuite, case)
    mine, base = result.totals.get(detector, {}), control.totals.get(detector, {})
    k1, n1 = int(mine.get("count", 0)), int(mine.get("total", 0))
    k0, n0 = int(base.get("count", 0)), int(base.get("total", 0))
    if cap is not None and n1:
        per_1200 = k1 * 1200 / n1
        assert per_1200 <= cap, f"{what} at {case.case_id}: {per_1200:.1f} per 1200 tokens exceeds the cap {cap}"
    if k1 == 0 or n1 == 0 or n0 == 0:
        return
    test = rate_ratio_test(k1, n1, k0, n0, alternative="greater")
    alpha = specsuite.run_config.alpha
    assert test.p_value >= alpha, (
        _describe(result, detector, what)
        + f"; greedy control {k0} in {n0}; exact rate-ratio test p={test.p_value:.2e} < alpha {alpha}")


def test_stray_rate_not_above_greedy_control(specsuite, sampled_case):
    """Stray `!` (token 0's text, which SGLang prints for out-of-range ids) against T=0."""
    _rate_not_above_control(specsuite, sampled_case, "stray_char", "stray characters", specsuite.run_config.correctness.max_stray_per_1200)


def test_replacement_chars_not_above_greedy_control(specsuite, sampled_case):
    _rate_not_above_control(specsuite, sampled_case, "replacement_char", "U+FFFD characters")


def test_repetition_loops_not_above_greedy_control(specsuite, sampled_case):
    """Degenerate loops per response, against T=0 (greedy n-gram-like loops are a model trait)."""
    result, control = specsuite.case_result(sampled_case), _control(specsuite, sampled_case)
    mine = result.totals.get("repetition_loop", {})
    base = control.totals.get("repetition_loop", {})
    k1, n1 = int(mine.get("responses_with_hits", 0)), int(mine.get("responses", 0))
    k0, n0 = int(base.get("responses_with_hits", 0)), int(base.get("responses", 0))
    if k1 == 0 or not n1 or not n0:
        return
    test = fisher_exact_2x2(k1, n1, k0, n0, alternative="greater")
    alpha = specsuite.run_config.alpha
    assert test.p_value >= alpha, (f"repetition loops at {sampled_case.case_id}: {k1} of {n1} responses vs greedy control {k0} of {n0}; "
                                   f"Fisher p={test.p_value:.2e} < alpha {alpha}; example: {result.example('repetition_loop')}")


def _speculative(specsuite) -> dict:
    spec = specsuite.server.identity.speculative
    if not spec.get("speculative_algorithm") or not spec.get("speculative_num_draft_tokens"):
        pytest.skip("the server does not run speculative decoding")
    return spec


def test_accept_length_within_bounds(specsuite, sampling_case):
    spec = _speculative(specsuite)
    result = specsuite.case_result(sampling_case)
    measured = [(request_accept_length(g.meta_info), g.meta_info.get("spec_verify_ct")) for g in result.generations]
    measured = [(value, verify_ct) for value, verify_ct in measured if value is not None]
    check = accept_length_within_bounds([v for v, _ in measured], int(spec["speculative_num_draft_tokens"]), [c for _, c in measured])
    assert check.passed, f"accept length out of bounds at {sampling_case.case_id}: {check.to_dict()}"


def test_acceptance_not_suspect_against_baseline(specsuite, sampled_case):
    """Acceptance anomalies are judged against a baseline arm (--baseline-url), never against this
    server's own T=0: a correct rejection sampler's acceptance can rise with temperature (SGLang
    0.5.17, EAGLE, H100: accept length 2.6-2.9 at T=1 against 2.0 greedy). The A/B engine
    (harness/compare/verdicts.py) calls a higher accept length "suspect" when the same arm is worse on
    a corruption sign (invalid, fallback or padded-row ids, strays): the founding bug's signature."""
    _speculative(specsuite)
    if not specsuite.run_config.baseline_url:
        pytest.skip("acceptance is judged against a baseline arm: pass --baseline-url (one server alone has no reference for it)")
    candidate = specsuite.case_result(sampled_case).to_dict()
    baseline = specsuite.baseline_case_result(sampled_case).to_dict()
    merged = dict(comparison_document({specsuite.server.arm: [{"repeat": 1, "cases": [candidate]}],
                                       "baseline": [{"repeat": 1, "cases": [baseline]}]}, "baseline"))
    analysis = compare_arms(merged, alpha=specsuite.run_config.alpha)
    suspect = [row for row in analysis.comparisons if row.metric == "accept_length" and row.verdict == "suspect"]
    assert not suspect, "; ".join(
        f"acceptance suspect at {sampled_case.case_id}: accept length {row.candidate_value:.3f} vs baseline {row.baseline_value:.3f}, "
        f"Holm p={row.p_adjusted:.2e} ({row.note})" for row in suspect)
