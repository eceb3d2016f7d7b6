"""Losslessness suite: speculative sampling must leave the target distribution unchanged.

- PIT calibration: tokens at positions >= 2, scored by a prefill request on the server under
  test (raw logprobs, tempered by the harness), must have uniform randomized PITs (KS + binned
  chi-square, Bonferroni); at T != 1 given the top-K, with the tail tokens counted against the
  bounds of the tail's mass.
- Two-sample: the same prompts on a speculation-off reference; chi-square homogeneity of the tokens
  at positions 2..k+2, and a log-likelihood calibration z.
- Greedy equality: T=0 outputs scored teacher-forced on the reference at every position; a flip at a
  near-tie of the reference's top is numerics, any other is a failure, and so are more near-tie flips
  than the noise model and the speculation-off control explain.

- Tail mass (T != 1, top_p 1): tokens outside the reference's top-K per sample, against the reference's.

Multiplicity: --alpha is the run's false-alarm budget for this family, split evenly over the lossless tests
collected (specsuite/pytest_plugin/lossless.py); each test's alpha below is its share.

Every test reads its sample size, power and smallest detectable effect into results.json
(`arms.<arm>.repeats[0].workloads.lossless`). Run with `-p specsuite.pytest_plugin.lossless` until conftest loads it.
"""

from __future__ import annotations

import pytest

from specsuite.families.lossless.records import LosslessSetting, PitUniformity

pytestmark = pytest.mark.lossless


def _judged(setting: LosslessSetting, model_defaults: dict | None) -> str:
    """The exact sampling parameters the requests sent, and the model defaults they overrode."""
    sent = ", ".join(f"{name} {value}" for name, value in (setting.sampling_params or {}).items())
    overridden = f"; overriding the model's generation defaults {model_defaults}" if model_defaults else ""
    return f"sampling sent: {sent}{overridden}"


def _top_bins(test: PitUniformity) -> str:
    observed, expected = test.bin_counts[-1], test.expected_counts[-1]
    return f"top bin [{test.bin_edges[-2]:.4f}, 1] holds {observed} vs {expected:.1f} expected"


def test_pit_calibration(lossless, lossless_setting):
    result = lossless.pit(lossless_setting)
    test = result.test
    summary = (f"PIT at {lossless_setting.key}: p={test.p_value:.3g} (KS p={test.ks_p:.3g}, chi-square p={test.chi2_p:.3g}) "
               f"over n={test.n} positions >= 2 from {result.requests} requests; {_top_bins(test)}; "
               f"{result.outside_support} tokens outside the nucleus; MDE (TV, 80% power) body {test.mde_tv_body:.4f}, "
               f"tail {test.mde_tv_tail:.5f}; {_judged(result.setting, lossless.model_defaults)}")
    tail = result.tail
    if tail:
        summary += (f"; given the top-K (T != 1): {tail.draws} tail tokens drawn where the target gives "
                    f"[{tail.expected_low:.2f}, {tail.expected_high:.2f}], p={tail.p_value:.3g}")
    print(summary)
    assert result.passed, f"not calibrated to the target: {summary} < alpha {test.alpha:g}"


def test_two_sample_homogeneity(lossless, lossless_setting):
    result = lossless.two_sample(lossless_setting)
    homogeneity = result.homogeneity
    worst = min(range(len(homogeneity.positions)), key=lambda i: homogeneity.adjusted_p_values[i])
    summary = (f"two-sample chi-square at {lossless_setting.key}: smallest Holm-adjusted p={homogeneity.p_value:.3g} "
               f"at position {homogeneity.positions[worst]} ({result.prompts} prompts x {result.samples_per_prompt} "
               f"samples per server; MDE of one token's probability {homogeneity.mde_token_probability}); "
               f"{_judged(result.setting, lossless.model_defaults)}")
    print(summary)
    assert homogeneity.passed, f"token distributions differ from the speculation-off reference: {summary}"


def test_loglik_calibration(lossless, lossless_setting):
    result = lossless.two_sample(lossless_setting)
    calibration = result.calibration
    summary = (f"log-likelihood calibration at {lossless_setting.key}: z={calibration.z:.2f} p={calibration.p_value:.3g}, "
               f"mean shift {calibration.mean_difference_nats:+.3f} nats per sample (MDE {calibration.mde_nats:.3f}); "
               f"{_judged(result.setting, lossless.model_defaults)}")
    print(summary)
    assert calibration.passed, f"target log-likelihood differs from the reference's: {summary}"


def test_tail_mass_two_sample(lossless, lossless_tail_setting):
    """At T != 1 with top_p 1 the top-K bounds the tail's mass only loosely; the reference's draws estimate it:
    tokens outside the reference's top-K per sample, test arm against reference (stratified z, two-sided)."""
    tail = lossless.two_sample(lossless_tail_setting).tail
    summary = (f"tail mass at {lossless_tail_setting.key}: {tail.mean_difference:+.3f} tail tokens per sample against the "
               f"reference's {tail.reference_tail_tokens:.3f}, z={tail.z:.2f} p={tail.p_value:.3g}; 80% power against a tail "
               f"mass x{tail.mde_ratio_low:.2f} or x{tail.mde_ratio_high:.2f} of the reference's")
    print(summary)
    assert tail.passed, f"the tail's mass differs from the speculation-off reference's: {summary} < alpha {tail.alpha:g}"


def test_mode_not_overdrawn(lossless):
    """Over-acceptance leans toward the draft's token: the target's mode with a greedy draft (over-drawn), tokens the
    draft over-rates with a sampled one (the mode under-drawn). Is the mode drawn as often as the target gives it
    (pooled PIT and two-sample generations, two-sided z)?"""
    result = lossless.directed()
    test = result.top_token_rate
    low, high = test.excess_rate_ci95 or (float("nan"), float("nan"))
    summary = (f"mode drawn {test.observed} times over {test.n} positions where the target expects {test.expected:.1f} "
               f"(excess {test.excess_rate:+.4f} per position, 95% CI [{low:+.4f}, {high:+.4f}], MDE {test.mde_excess_rate:.4f}); "
               f"z={test.z:.2f} p={test.p_value:.3g}; settings {', '.join(result.settings)}")
    print(summary)
    how = "over-draws" if test.z > 0 else "under-draws"
    assert test.passed, f"the sampler {how} the target's mode: {summary} < alpha {test.alpha:g}"


def test_draft_acceptance_calibrated(lossless):
    """With a greedy draft a correct sampler accepts draft x with probability p(x), so E[accepted / p] = 1 at
    every draft-evaluated position: a test martingale of that ratio (anytime-valid, Ville)."""
    draft = lossless.draft_sampling()
    if not draft.greedy:
        pytest.skip(f"the draft is sampled (draft_sample_method {draft.method}, {draft.source}): E[accepted / p] = 1 "
                    "holds for a greedy draft only")
    result = lossless.directed()
    test = result.acceptance_betting
    if not test.applicable:
        pytest.skip("acceptance betting needs per-step acceptance stats (vLLM --per-request-spec-decode-metrics detailed)")
    summary = (f"{test.accepted} accepted of {test.draft_positions} draft-evaluated positions, mean accepted/p "
               f"{test.mean_weighted_acceptance:.3f} (1 for a correct sampler with a greedy draft: {draft.source}); max log e-value "
               f"{test.max_log_e_value:.2f}, p={test.p_value:.3g}")
    print(summary)
    assert test.passed, f"drafts are accepted more often than p allows: {summary} < alpha {test.alpha:g}"


@pytest.mark.greedy_equality
def test_greedy_equality(lossless):
    result = lossless.greedy()
    lines = []
    print(f"greedy near-tie rule: {result.near_tie.tolerance:.3g} nats ({result.near_tie.source})")
    for run in result.concurrencies:
        print(f"greedy at concurrency {run.concurrency}: {run.equal}/{run.prompts} equal, "
              f"{run.numerics} near-tie flips, {run.real} real divergences (every position scored on the reference); {run.near_tie_test}")
        for divergence in run.divergences:
            if divergence.kind == "real":
                lines.append(f"concurrency {run.concurrency} prompt {divergence.prompt_index} position {divergence.position}: "
                             f"{divergence.test_token} vs reference {divergence.reference_token} ({divergence.reason})")
        if run.near_tie_excess:
            lines.append(f"concurrency {run.concurrency}: more near-tie flips than numerics explain: {run.near_tie_test}")
    sent = ", ".join(f"{name} {value}" for name, value in (result.sampling_params or {}).items())
    assert result.passed, f"{len(lines)} greedy findings against the reference (sampling sent: {sent}): " + "; ".join(lines[:5])
