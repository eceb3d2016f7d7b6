"""The verification-rule check (specsuite/kernels/rule_check.py): exact where the sampler takes the coins,
an exact total-length test where it draws its own.  Numpy verifiers written from the papers
(specsuite/kernels/model_verifiers.py) pass and their stated defects fail; float32 rounding at a threshold
is a tie, not a failure; SGLang 0.5.23 passes and a copy of it with block acceptance scaled by 1.25
fails (the mutant the distribution family let through)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from specsuite.kernels import distribution, rule_check
from specsuite.kernels.inputs import KernelShape
from specsuite.kernels.invoke import ChainOutcome, run_input
from specsuite.kernels.loader import load_kernel
from specsuite.kernels.model_verifiers import model_kernel
from specsuite.kernels.mutants import acceptance_mutant

SHAPE = KernelShape(kernel_vocab=512, tokenizer_vocab=512)


def _check(kernel, seed: int = 0) -> rule_check.RuleCheck:
    return rule_check.rule_check_for(kernel, SHAPE, seed)


@pytest.mark.parametrize("block", [False, True])
def test_correct_verifiers_follow_the_rule(block: bool) -> None:
    for seed in range(2):
        check = _check(model_kernel(block), seed)
        assert check.passed, check.message()
        assert check.observed_mean == check.expected_mean


@pytest.mark.parametrize(("block", "defect", "wrong"), [
    (False, "accept-bias", "wrong_length"),
    (True, "block-accept-bias", "wrong_length"),
    (True, "block-stop-at-prefix-weight", "wrong_length"),
    (True, "block-unscaled-residual", "wrong_final"),  # the family's sequence tests never saw this one (0/100)
    (False, "residual-from-p", "wrong_final"),
])
def test_defects_break_the_rule(block: bool, defect: str, wrong: str) -> None:
    check = _check(model_kernel(block, defect))
    assert not check.passed and getattr(check, wrong) > 0, check.message()
    assert check.example is not None and "row" in check.example and check.message().count("e.g.") == 1
    if wrong == "wrong_length":
        assert check.longer == check.wrong_length and check.observed_mean > check.expected_mean


def test_a_wrong_committed_draft_fails() -> None:
    data, outcome = rule_check.run_rule(model_kernel(True), SHAPE, 0)
    row = int(np.flatnonzero(outcome.accepted > 0)[0])
    emitted = outcome.emitted.copy()
    emitted[row, 0] = (emitted[row, 0] + 1) % SHAPE.tokenizer_vocab
    check = rule_check.check_rule(data, ChainOutcome(outcome.accepted, emitted, outcome.final_ids), True)
    assert check.wrong_drafts == 1 and check.example["row"] == row


@pytest.mark.parametrize("block", [False, True])
def test_a_coin_on_the_threshold_is_a_tie_not_a_failure(block: bool) -> None:
    """A coin equal to the float64 threshold: a float32 sampler may fall either side, so both answers pass."""
    data, outcome = rule_check.run_rule(model_kernel(block), SHAPE, 0)
    thresholds = rule_check.thresholds_for(data, block)
    rows, steps = np.nonzero((thresholds.value > 0.05) & (thresholds.value < 0.95))
    row, step = int(rows[0]), int(steps[0])
    coins = data.accept_coins.copy()
    coins[row] = 0.999 if block else 0.0  # block: no other step stops; token: every step before accepts
    coins[row, step] = np.float32(thresholds.value[row, step])
    edited = replace(data, accept_coins=coins)
    honest = run_input(model_kernel(block), edited)
    check = rule_check.check_rule(edited, honest, block)
    assert check.passed and check.length_ties >= 1, check.message()
    other = step + 1 if honest.accepted[row] == step else step  # the answer on the other side of the threshold
    if block:
        other = step + 1 if honest.accepted[row] == 0 else 0
    accepted = honest.accepted.copy()
    accepted[row] = other
    emitted = honest.emitted.copy()
    emitted[row] = -1
    emitted[row, :other] = edited.draft_ids[row, :other]
    emitted[row, other] = honest.final_ids[row]  # the final token is then judged at the other length
    flipped = rule_check.check_rule(edited, ChainOutcome(accepted, emitted, emitted[np.arange(edited.batch), accepted]), block)
    assert flipped.wrong_length == 0, flipped.message()


def test_total_length_test_is_valid_in_level() -> None:
    """Fresh coins the test does not see (a sampler with its own generator) on one input, 300 times: the exact
    test's p-value is at most its level in share, for both rules."""
    data = rule_check.rule_input(1, SHAPE)
    rng = np.random.default_rng(2)
    for block in (False, True):
        values = rule_check.thresholds_for(data, block).value
        p_values = []
        for _ in range(300):
            accepted = rule_check.accepted_under(values, rng.random(values.shape), block)
            p_values.append(rule_check.total_length_test(data, ChainOutcome(accepted, np.zeros((data.batch, 1)), accepted), block).p_value)
        for level in (0.05, 0.2):
            assert np.mean(np.array(p_values) <= level) <= level + 3 * np.sqrt(level * (1 - level) / 300), (block, level)


def test_total_length_test_fires_on_a_token_accept_bias_with_own_coins() -> None:
    """vLLM's case: a sampler drawing its own coins, accepting when coin * q < 1.25 p, at the rows used for it."""
    for seed in range(2):
        data = rule_check.rule_input(seed, SHAPE, rule_check.RULE_ROWS_OWN_COINS)
        rng = np.random.default_rng(10_000 + seed)
        fresh = replace(data, accept_coins=rng.random(data.accept_coins.shape, dtype=np.float32))
        biased = rule_check.total_length_test(data, run_input(model_kernel(False, "accept-bias"), fresh), False)
        honest = rule_check.total_length_test(data, run_input(model_kernel(False), fresh), False)
        assert biased.p_value < 1e-6 and biased.observed_total > biased.expected_total and honest.p_value > 1e-3


def test_total_length_distribution_matches_simulation() -> None:
    """The convolution's mean and variance against the rows' own: sum of per-row means and variances."""
    data = rule_check.rule_input(3, SHAPE)
    for block in (False, True):
        values = rule_check.thresholds_for(data, block).value
        dist = rule_check.length_distributions(values, block)
        assert np.allclose(dist.sum(axis=1), 1.0)
        rng = np.random.default_rng(0)
        draws = np.stack([rule_check.accepted_under(values, rng.random(values.shape), block) for _ in range(400)])
        assert abs(draws.mean() - (dist @ np.arange(dist.shape[1])).mean()) < 0.05


def test_monte_carlo_draws_keep_holms_first_level_reachable() -> None:
    for family in (24, 32, 64, 112, 500):
        draws = distribution.monte_carlo_draws(family, 0.001)
        resolution = distribution.monte_carlo_resolution(draws, 0.001, family)
        assert resolution.x2_can_reject and resolution.largest_family_x2_can_reject >= family
    fixed = distribution.monte_carlo_resolution(distribution.MONTE_CARLO_DRAWS, 0.001, 112)
    assert not fixed.x2_can_reject and fixed.largest_family_x2_can_reject == 100  # a fixed R stops short of vLLM at 9 steps
    # A grossly wrong sample in vLLM's family at 9 draft steps (113 tests): its p-value reaches Holm's first level.
    probabilities = np.array([0.4, 0.3, 0.2, 0.1])
    draws = distribution.monte_carlo_draws(113, 0.001)
    _, p_value = distribution.monte_carlo_x2(np.array([20.0, 30.0, 60.0, 90.0]), probabilities, 11, draws)
    assert p_value <= 0.001 / 113 < distribution.monte_carlo_x2(np.array([20.0, 30.0, 60.0, 90.0]), probabilities, 11)[1]


def test_a_1_25x_block_acceptance_mutant_of_sglang_0_5_23_fails(tmp_path: Path) -> None:
    """128 rows (half the suite's, for time): the mutant moves about 10 of them.  0.5.23 as released passes the
    same check in the suite runs (tests/kernels/test_kernel_engine_outcomes.py for block verification,
    tests/kernels/test_kernel_suite_outcomes.py for token verification, 0.5.20's too)."""
    mutant = load_kernel(f"{acceptance_mutant(1.25, tmp_path, block=True)}:block")
    check = rule_check.rule_check_for(mutant, SHAPE, 0, rows=128)
    assert not check.passed and check.longer > 0 and check.wrong_final == 0, check.message()
    assert check.longer == check.wrong_length and check.observed_mean > check.expected_mean


def _own_coin_kernel(defect: str | None):
    """A numpy token verifier behind the vLLM engine's call (whole input in, outcome out), drawing its own coins."""
    from specsuite.kernels.loader import KernelSpec, LoadedKernel

    inner = model_kernel(False, defect)
    rng = np.random.default_rng(5)

    def sample(data):
        fresh = replace(data, accept_coins=rng.random(data.accept_coins.shape, dtype=np.float32),
                        final_coins=rng.random(data.batch, dtype=np.float32))
        return run_input(inner, fresh)

    return LoadedKernel(KernelSpec("vllm-installed", "vllm"), f"own-coin numpy token verifier ({defect})", "cpu (numpy)", "cpu", sample)


def test_own_coin_samplers_get_the_rule_test_in_the_family() -> None:
    level = 0.001 / 65
    honest = distribution.rule_family_test(_own_coin_kernel(None), SHAPE, 0, level)
    assert honest.name == "rule/rule-total@-1" and honest.n == rule_check.RULE_ROWS_OWN_COINS and honest.p_value > level
    assert honest.detectable_at_90 is not None and 0 < honest.detectable_at_90 < 0.5  # accepted drafts per row (a 1.25x bias: +0.7)
    biased = distribution.rule_family_test(_own_coin_kernel("accept-bias"), SHAPE, 0, level)
    assert biased.p_value < level and biased.statistic.observed_rate > biased.statistic.expected_rate
    assert distribution.kernel_family_size(_own_coin_kernel(None), 5) == distribution.family_size(5, 4, False, own_coins=True) == 65
