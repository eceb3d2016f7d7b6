"""Correctness suite: token validity, stray characters, special fragments and acceptance anomalies
at every point of the sampling grid.

Zero tolerance for ids outside [0, vocab_size) and for the sampler's fallback `vocab_size - 1` where it is a padded row; the
other padded rows get a little mass from the model itself and are judged against it, one-sided.  Text symptoms that a
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

from specsuite.analysis.verdicts import compare_arms
from specsuite.errors import SpecsuiteError
from specsuite.families.correctness.acceptance import accept_length_within_bounds, request_accept_length
from specsuite.families.correctness.padded_rows import (
    PaddedRowJudgement,
    judge_by_model_mass,
    judge_by_reference_rate,
    score_padded,
)
from specsuite.families.correctness.workload import CaseResult, SamplingCase
from specsuite.results.builder import comparison_of
from specsuite.results.types import Case, Repeat
from specsuite.server import kinds
from specsuite.server.identity import ServerIdentity
from specsuite.server.meta_info import MetaInfo
from specsuite.stats import fisher_exact_2x2, rate_ratio_test

pytestmark = pytest.mark.correctness

def _control(specsuite, case: SamplingCase) -> CaseResult:
    return specsuite.case_result(SamplingCase(0.0, case.top_p if case.greedy else 1.0))


def _describe(result: CaseResult, detector: str, what: str) -> str:
    entry = result.total(detector)
    total = entry.total or 0
    rate = entry.count / total if total else 0.0
    return (f"{what} at {result.case.case_id}: {entry.count} in {total} {entry.unit} "
            f"(rate {rate:.3%}, 95% upper bound {entry.upper95:.3%}); example: {result.example(detector)}")


def _assert_zero(result: CaseResult, detector: str, what: str) -> None:
    assert result.count(detector) == 0, _describe(result, detector, what)


def test_requests_succeed(specsuite, sampling_case):
    result = specsuite.case_result(sampling_case)
    assert not result.errors, (f"{len(result.errors)} of {len(result.errors) + len(result.generations)} requests failed "
                               f"at {sampling_case.case_id}: {result.errors[0]}")


def test_no_invalid_token_ids(specsuite, sampling_case):
    """Token validity: no id outside [0, vocab_size), which no sampler may draw (padded rows are judged below)."""
    result = specsuite.case_result(sampling_case)
    vocab = specsuite.server.vocab
    detail = (f"; ids outside the tokenizer {result.count('invalid_id')}, of them padded rows {result.count('padded_row_id')} "
              f"(fallback id {vocab.fallback_id}: {result.count('fallback_id')}); tokenizer length {vocab.tokenizer_length}, vocab_size {vocab.vocab_size}")
    assert result.count("out_of_vocab_id") == 0, _describe(result, "out_of_vocab_id", "token validity: ids outside the vocabulary") + detail


def test_padded_row_ids_within_model_mass(specsuite, sampling_case):
    """Padded rows other than the fallback, [tokenizer length, vocab_size - 1), against the model's own mass for them:
    a one-sided Poisson bound from a scoring request with SGLang's token_ids_logprob (specsuite/families/correctness/
    padded_rows.py). Where the server cannot score per-id logprobs (vLLM), against the speculation-off arm's rate
    (--lossless-reference-url) by an exact one-sided conditional binomial test; without one, reported, not failed."""
    result = specsuite.case_result(sampling_case)
    observed = result.count("model_padded_row_id")
    if observed == 0:
        return
    judgement = _judge_padded_rows(specsuite, sampling_case, result)
    if judgement.method == "not judged":
        pytest.skip(f"padded rows at {sampling_case.case_id}: {judgement.describe()}")
    print(f"padded rows at {sampling_case.case_id}: {judgement.describe()}")
    assert not judgement.failed, (f"token validity: padded-row ids above the model's own rate at {sampling_case.case_id}: "
                                  f"{judgement.describe()}; example: {result.example('model_padded_row_id')}")


def _judge_padded_rows(specsuite, case: SamplingCase, result: CaseResult) -> PaddedRowJudgement:
    client, vocab, alpha = specsuite.server.client, specsuite.server.vocab, specsuite.run_config.alpha
    kind = kinds.kind_of_client(client)
    why = f"the server cannot score per-id logprobs ({kind.display_name} has no token_ids_logprob)"
    scores = kind.scores_token_ids_logprob
    if scores:
        try:
            return judge_by_model_mass(result.generations, vocab, lambda g: score_padded(client, vocab, g),
                                       temperature=case.temperature, top_p=case.top_p, alpha=alpha)
        except SpecsuiteError as exc:
            why = str(exc)
    observed, tokens = result.count("model_padded_row_id"), result.total("model_padded_row_id").total
    if case.greedy and not scores:  # an SGLang server whose scoring failed is not failed on it: reported below
        return PaddedRowJudgement(observed, tokens, "greedy", p_value=0.0, alpha=alpha, reason=why)
    if not specsuite.run_config.lossless.reference_url:
        return PaddedRowJudgement(observed, tokens, "not judged", alpha=alpha, reason=f"{why}, and no --lossless-reference-url to compare with")
    reference = specsuite.reference_case_result(case)
    totals = reference.total("model_padded_row_id")
    return judge_by_reference_rate(observed, tokens, totals.count, totals.total, alpha=alpha)


def test_no_fallback_ids(specsuite, sampling_case):
    """No vocab_size-1, the sampler's fallback when its residual search fails, where that id is a padded row (the
    detector counts none on a checkpoint without padded rows: there it is an ordinary token, judged like any other)."""
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
    (a weak greedy model can loop over well-formed blocks; a corrupted sampler's garbage is far above it)."""
    _rate_not_above_control(specsuite, sampled_case, "fragment_text", "special fragments out of structure")


def _rate_not_above_control(specsuite, case: SamplingCase, detector: str, what: str, cap: float | None = None) -> None:
    result, control = specsuite.case_result(case), _control(specsuite, case)
    mine, base = result.total(detector), control.total(detector)
    k1, n1, k0, n0 = mine.count, mine.total, base.count, base.total
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
    mine, base = result.total("repetition_loop"), control.total("repetition_loop")
    k1, n1, k0, n0 = mine.responses_with_hits, mine.responses, base.responses_with_hits, base.responses
    if k1 == 0 or not n1 or not n0:
        return
    test = fisher_exact_2x2(k1, n1, k0, n0, alternative="greater")
    alpha = specsuite.run_config.alpha
    assert test.p_value >= alpha, (f"repetition loops at {sampled_case.case_id}: {k1} of {n1} responses vs greedy control {k0} of {n0}; "
                                   f"Fisher p={test.p_value:.2e} < alpha {alpha}; example: {result.example('repetition_loop')}")


def _speculative(specsuite) -> ServerIdentity:
    identity = specsuite.server.identity
    if not identity.speculative_algorithm or not identity.speculative_num_draft_tokens:
        pytest.skip("the server does not run speculative decoding")
    return identity


def test_accept_length_within_bounds(specsuite, sampling_case):
    identity = _speculative(specsuite)
    result = specsuite.case_result(sampling_case)
    measured = [(request_accept_length(g.meta_info), MetaInfo.parse(g.meta_info).spec_verify_ct) for g in result.generations]
    measured = [(value, verify_ct) for value, verify_ct in measured if value is not None]
    check = accept_length_within_bounds([v for v, _ in measured], int(identity.speculative_num_draft_tokens), [c for _, c in measured])
    assert check.passed, f"accept length out of bounds at {sampling_case.case_id}: {check.to_dict()}"


def test_acceptance_not_suspect_against_baseline(specsuite, sampled_case):
    """Acceptance anomalies are judged against a baseline arm (--baseline-url), never against this
    server's own T=0: a correct rejection sampler's acceptance can rise with temperature (SGLang
    0.5.17, EAGLE, H100: accept length 2.6-2.9 at T=1 against 2.0 greedy). The A/B engine
    (specsuite/analysis/verdicts.py) calls a higher accept length "suspect" when the same arm is worse on
    a corruption sign (invalid, fallback or padded-row ids, strays): the signature of corrupt draft probabilities."""
    _speculative(specsuite)
    if not specsuite.run_config.baseline_url:
        pytest.skip("acceptance is judged against a baseline arm: pass --baseline-url (one server alone has no reference for it)")
    candidate = specsuite.case_result(sampled_case).to_dict()
    baseline = specsuite.baseline_case_result(sampled_case).to_dict()
    merged = comparison_of({specsuite.server.arm: [Repeat(cases=[Case.from_dict(candidate)])],
                            "baseline": [Repeat(cases=[Case.from_dict(baseline)])]}, "baseline")
    analysis = compare_arms(merged, alpha=specsuite.run_config.alpha)
    suspect = [row for row in analysis.comparisons if row.metric == "accept_length" and row.verdict == "suspect"]
    assert not suspect, "; ".join(
        f"acceptance suspect at {sampled_case.case_id}: accept length {row.candidate_value:.3f} vs baseline {row.baseline_value:.3f}, "
        f"Holm p={row.p_adjusted:.2e} ({row.note})" for row in suspect)
