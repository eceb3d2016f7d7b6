"""The two-sample tests (specsuite/families/lossless/two_sample.py) on synthetic token sequences.

Samples come from small Markov chains: the same chain for both arms under the null (the test must
pass, and reject at about its nominal rate over replicates), a chain whose transitions lean toward
a draft's favourites for the alternative (it must fail). The log-likelihood calibration must
centre on 0 under the null and move with the right sign under a mode-seeking shift.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from specsuite.errors import SpecsuiteError
from specsuite.families.lossless.pit import PitValues, tail_rate_test
from specsuite.families.lossless.scoring import ScoredPosition
from specsuite.families.lossless.tempering import TemperedPosition, tempered
from specsuite.families.lossless.two_sample import END, UNDECIDED, homogeneity_table, homogeneity_test, loglik_calibration, tail_mass_test, tokens_at

VOCAB = 12
POSITIONS = list(range(2, 8))
ALPHA = 1e-3


def _chain(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).dirichlet(np.full(VOCAB, 0.5), size=VOCAB)


def _leaning(transitions: np.ndarray, weight: float) -> np.ndarray:
    """Mix each row with a one-hot on a fixed "draft favourite" token."""
    favourite = np.zeros(VOCAB)
    favourite[3] = 1.0
    return (1 - weight) * transitions + weight * favourite


def _samples(transitions: np.ndarray, prompts: int, size: int, seed: int, length: int = 7) -> list[list[list[int]]]:
    rng = np.random.default_rng(seed)
    result = []
    for prompt in range(prompts):
        samples = []
        for _ in range(size):
            token, sequence = prompt % VOCAB, []
            for _ in range(length):
                token = int(rng.choice(VOCAB, p=transitions[token]))
                sequence.append(token)
            samples.append(sequence)
        result.append(samples)
    return result


def test_tokens_at_is_one_based_and_marks_the_end():
    assert tokens_at([5, 6, 7], 1) == 5 and tokens_at([5, 6, 7], 3) == 7 and tokens_at([5, 6, 7], 4) == END


def test_table_pools_rare_tokens_and_needs_two_categories():
    table = homogeneity_table([1] * 30 + [2] * 30 + [9], [1] * 30 + [2] * 30 + [8])
    assert table.categories == 2 and table.dof == 1  # 8 and 9 are too rare even together: joined to a category
    assert homogeneity_table([1] * 20, [1] * 20).dof == 0
    with pytest.raises(SpecsuiteError):
        homogeneity_table([], [1])


def test_same_distribution_passes():
    chain = _chain(0)
    result = homogeneity_test(_samples(chain, 4, 200, seed=1), _samples(chain, 4, 200, seed=2), POSITIONS, ALPHA)
    assert result.passed and result.p_value > ALPHA, result
    assert result.mde_token_probability is not None and 0 < result.mde_token_probability < 0.5


def test_false_alarm_rate_matches_alpha():
    chain = _chain(3)
    rejections = sum(
        not homogeneity_test(_samples(chain, 2, 60, seed=2 * i), _samples(chain, 2, 60, seed=2 * i + 1), POSITIONS, 0.05).passed
        for i in range(40)
    )
    # Holm across positions keeps the family-wise rate at or below alpha.
    assert stats.binomtest(rejections, 40, 0.05, alternative="greater").pvalue > 1e-3, rejections


def test_leaning_toward_a_draft_favourite_fails():
    chain = _chain(4)
    result = homogeneity_test(_samples(_leaning(chain, 0.3), 4, 200, seed=5), _samples(chain, 4, 200, seed=6), POSITIONS, ALPHA)
    assert not result.passed and result.p_value < 1e-6, result


def test_early_ends_count_as_their_own_category():
    chain = _chain(7)
    reference = _samples(chain, 2, 200, seed=8)
    truncated = [[sample[:3] for sample in prompt] for prompt in _samples(chain, 2, 200, seed=9)]
    assert not homogeneity_test(truncated, reference, POSITIONS, ALPHA).passed


def _logliks(transitions: np.ndarray, target: np.ndarray, samples: list[list[list[int]]]) -> list[list[float]]:
    return [[float(sum(np.log(target[a, b]) for a, b in zip([p % VOCAB] + s[:-1], s, strict=False))) for s in prompt]
            for p, prompt in enumerate(samples)]


def test_calibration_centres_on_zero_under_the_null():
    chain = _chain(10)
    test = _logliks(chain, chain, _samples(chain, 4, 300, seed=11))
    reference = _logliks(chain, chain, _samples(chain, 4, 300, seed=12))
    result = loglik_calibration(test, reference, ALPHA)
    assert result.passed and abs(result.z) < 3.3
    assert result.mde_nats > 0


def test_calibration_sign_follows_a_mode_seeking_shift():
    chain = _chain(13)
    sharp = chain**2
    sharp /= sharp.sum(axis=1, keepdims=True)
    test = _logliks(sharp, chain, _samples(sharp, 4, 300, seed=14))
    reference = _logliks(chain, chain, _samples(chain, 4, 300, seed=15))
    result = loglik_calibration(test, reference, ALPHA)
    assert not result.passed and result.z > 0 and result.mean_difference_nats > 0


def test_calibration_needs_two_samples_per_arm():
    with pytest.raises(SpecsuiteError, match="at least two samples"):
        loglik_calibration([[1.0]], [[1.0, 2.0]], ALPHA)


def test_calibration_with_identical_constant_samples_is_zero():
    assert loglik_calibration([[-1.0, -1.0]], [[-1.0, -1.0]], ALPHA).z == 0.0


# -- the tail's mass at T != 1 (tail_mass_test) ---------------------------------------------------

TAIL_VOCAB = 152_064  # a Qwen-size vocabulary
TAIL_T = 1.3
TAIL_POSITIONS = 6  # positions 2..k+2 with k = 5


def _zipf_tail_position(token: int) -> TemperedPosition:
    """One position of a Zipf(1.9) target over TAIL_VOCAB ids, scored top-20, at T = 1.3: the tail beyond the
    top-20 holds 0.191 of the tempered mass, and the top-20 alone bounds it within [0.109, 0.484]."""
    logprobs = -1.9 * np.log(np.arange(1, TAIL_VOCAB + 1.0))
    logprobs -= np.log(np.exp(logprobs).sum())
    scored = ScoredPosition(token_id=token, top_ids=tuple(range(20)), top_logprobs=tuple(logprobs[:20]),
                            token_logprob=float(logprobs[min(token, TAIL_VOCAB - 1)]))
    return tempered(scored, TAIL_T, TAIL_VOCAB)


def _tail_counts(rate: float, rng: np.random.Generator, prompts: int = 4, size: int = 200) -> list[list[int]]:
    return [rng.binomial(TAIL_POSITIONS, rate, size).tolist() for _ in range(prompts)]


def test_tail_share_of_the_zipf_target_and_its_loose_bounds():
    position = _zipf_tail_position(0)
    low, high = position.tail_mass_bounds()
    assert 0.10 < low < 0.11 and 0.48 < high < 0.49


@pytest.mark.parametrize("factor", [0.65, 1.65])
def test_tail_mass_moved_between_top_k_and_tail_passes_the_pit_bounds_but_not_the_reference(factor):
    """Moving the tail's mass by x0.65 or x1.65 stays inside the bounds the top-K alone gives, so the PIT's tail
    count passes it; against the reference's own draws the two-sample tail-mass test catches it."""
    true_tail = 0.191
    rng = np.random.default_rng(41)
    positions = [_zipf_tail_position(0)] * (4 * 200 * TAIL_POSITIONS)
    draws = int(rng.binomial(len(positions), factor * true_tail))
    low, high = positions[0].tail_mass_bounds()
    values = PitValues(np.array([]), 0, 0, tail_positions=len(positions), tail_draws=draws,
                       tail_expected_low=low * len(positions), tail_expected_high=high * len(positions))
    assert tail_rate_test(values, 0.001).passed  # the blind spot: judged by its count against loose bounds
    result = tail_mass_test(_tail_counts(factor * true_tail, rng), _tail_counts(true_tail, rng), 0.001)
    assert not result.passed, result
    assert result.mde_ratio_low > factor or factor > result.mde_ratio_high


def test_tail_mass_false_alarm_rate_matches_alpha():
    rng = np.random.default_rng(7)
    p_values = [tail_mass_test(_tail_counts(0.191, rng), _tail_counts(0.191, rng), 0.01).p_value for _ in range(400)]
    rejected = sum(p < 0.05 for p in p_values)
    assert stats.binomtest(rejected, 400, 0.05).pvalue > 0.001
    assert stats.kstest(p_values, "uniform").pvalue > 0.001


def test_tail_mass_power_is_stated_for_the_job_sizes():
    """At 4 prompts x 200 samples of 6 scored positions and a tail of 0.191, the test has 80% power at alpha
    0.001 against a tail mass about x0.8 or x1.2 of the reference's: well inside x0.65 .. x1.65."""
    rng = np.random.default_rng(3)
    result = tail_mass_test(_tail_counts(0.191, rng), _tail_counts(0.191, rng), 0.001)
    assert 0.75 < result.mde_ratio_low < 0.85 and 1.15 < result.mde_ratio_high < 1.25, result


def test_tokens_at_an_undecided_nucleus_edge_are_one_category():
    """At top_p < 1 the homogeneity tables put every draw at a position whose nucleus edge lies within the numerics
    gap into UNDECIDED (the same rule in both arms); decided positions keep their token."""
    from specsuite.families.lossless.greedy import near_tie_rule
    from specsuite.families.lossless.workload import LosslessConfig, LosslessWorkload, SamplingSetting

    def position(probs: list[float]) -> TemperedPosition:
        logprobs = np.log(probs)
        return tempered(ScoredPosition(token_id=1, top_ids=tuple(range(len(probs))), top_logprobs=tuple(logprobs),
                                       token_logprob=float(logprobs[1])), 1.0, len(probs))

    edge, clear = position([0.6, 0.295, 0.05, 0.03, 0.025]), position([0.8, 0.15, 0.03, 0.01, 0.01])
    setting = SamplingSetting(1.0, 0.9)
    for dtype, expected in (("bfloat16", [7, UNDECIDED, 9, 4]), ("float32", [7, 8, 9, 4])):
        workload = LosslessWorkload(None, None, ["a"], LosslessConfig(), sampling_numerics=near_tie_rule(dtype))  # type: ignore[arg-type]
        assert workload._edge_masked([7, 8, 9, 4], [None, edge, clear], setting) == expected
    assert workload._edge_masked([7, 8], [None, edge], SamplingSetting(1.0)) == [7, 8]  # top_p 1: nothing to mask
