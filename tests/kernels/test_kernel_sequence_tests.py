"""The distribution family that holds for any lossless verifier, against numpy verifiers whose truth is
known (specsuite/kernels/model_verifiers.py): quiet on correct token and block verification, firing on
stated defects of each; the block-versus-token length test firing on a block path that accepts less;
and the vLLM adapter's pure parts (logits, seeds, the output's unpacking).  No SGLang or vLLM needed."""

from __future__ import annotations

import numpy as np
import pytest

from specsuite.kernels import distribution
from specsuite.kernels.inputs import KernelShape, build_input, sampling_targets
from specsuite.kernels.invariants import check_greedy_rows, check_in_target_support
from specsuite.kernels.invoke import ChainOutcome, run_input
from specsuite.kernels.model_verifiers import model_kernel

SHAPE = KernelShape(batch=256, kernel_vocab=512, tokenizer_vocab=512)
ALPHA = 0.001


def _fired(block: bool, defect: str | None, seed: int = 0, rows: int = distribution.DEFAULT_ROWS) -> set[str]:
    tests, _ = distribution.run_family(model_kernel(block, defect), SHAPE, seed, rows, ALPHA)
    return {f"{t.scenario}/{t.test}" for t in tests if t.rejected}


@pytest.mark.parametrize("block", [False, True])
def test_family_is_quiet_on_correct_verifiers(block: bool) -> None:
    assert _fired(block, None) == set()


@pytest.mark.parametrize(("block", "defect", "fires"), [
    (False, "residual-from-p", "well-formed/sequence-marginal"),
    (False, "warm-target", "well-formed/sequence-marginal"),
    (True, "block-stop-at-prefix-weight", "well-formed/sequence-marginal"),
])
def test_sequence_tests_fire_on_a_broken_verifier(block: bool, defect: str, fires: str) -> None:
    """At 8x the suite's rows (numpy is fast): these defects are small (Cohen's w 0.07-0.13 on the chain), below
    what the default 1024 rows detect reliably; tools/calibration/kernel_sequence_power.py gives the power there."""
    assert fires in _fired(block, defect, rows=8 * distribution.DEFAULT_ROWS)


def test_accepted_length_test_fires_when_block_accepts_less() -> None:
    rng = np.random.default_rng(0)
    token = rng.integers(0, 6, 1024)
    longer = ChainOutcome(np.minimum(token + (rng.random(1024) < 0.1), 5), np.zeros((1024, 6)), np.zeros(1024))
    shorter = ChainOutcome(np.maximum(token - (rng.random(1024) < 0.1), 0), np.zeros((1024, 6)), np.zeros(1024))
    base = ChainOutcome(token, np.zeros((1024, 6)), np.zeros(1024))
    assert distribution.accepted_length_test("s", longer, base, ALPHA / 30).p_value > 0.5
    result = distribution.accepted_length_test("s", shorter, base, ALPHA / 30)
    assert result.p_value < 1e-8 and result.statistic.difference_ci95[1] < 0
    assert result.detectable_at_90 is not None and 0 < result.detectable_at_90 < 0.1


def test_family_sizes_match_what_runs() -> None:
    for block in (False, True):
        tests, _ = distribution.run_family(model_kernel(block), SHAPE, 0, 256, ALPHA)
        assert len(tests) == distribution.family_size(SHAPE.steps, len(distribution.SCENARIOS), block)


def test_monte_carlo_p_value_is_exact_in_level() -> None:
    """Under the null, P(p <= 0.05) is at most 0.05 (checked over 400 multinomial samples)."""
    probabilities = np.array([0.5, 0.3, 0.15, 0.05])
    rng = np.random.default_rng(1)
    p_values = [distribution.monte_carlo_x2(rng.multinomial(200, probabilities).astype(float), probabilities, 7, 20_000)[1]
                for _ in range(400)]
    share = np.mean(np.array(p_values) <= 0.05)
    assert share <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 400)


def test_in_target_support_and_greedy_checks_fire() -> None:
    """The two invariants added for logit-taking engines, on outcomes broken by hand."""
    data = build_input("mixed-greedy-random", 0, SHAPE)
    honest = run_input(model_kernel(False), data)
    targets = sampling_targets(data)
    argmax = data.target_probs.argmax(axis=-1)
    # Greedy rows through the numpy sampler are not greedy (it ignores temperature): expected to fail...
    assert not check_greedy_rows(data, honest).passed
    # ...and a hand-made greedy answer passes.
    steps = data.draft_ids.shape[1]
    matches = data.draft_ids == argmax[:, :steps]
    accepted = np.where(matches.all(axis=1), steps, np.argmin(matches, axis=1))
    emitted = np.full((data.batch, steps + 1), -1)
    for row, count in enumerate(accepted):
        emitted[row, :count] = data.draft_ids[row, :count]
        emitted[row, count] = argmax[row, count]
    assert check_greedy_rows(data, ChainOutcome(accepted, emitted, emitted[np.arange(data.batch), accepted])).passed
    outside = int(np.flatnonzero(targets[0, 0] == 0)[0])
    broken = ChainOutcome(np.zeros(data.batch, np.int64), np.full((data.batch, steps + 1), -1), np.full(data.batch, outside))
    broken.emitted[:, 0] = outside
    result = check_in_target_support(data, broken)
    assert not result.passed and result.example["id"] == outside and result.example["target_probability"] == 0.0


def test_vllm_adapter_logits_and_output_unpacking() -> None:
    from specsuite.kernels.vllm_sampler import outcome_from_output, row_seeds, target_logits

    data = build_input("temperature-top-p", 0, SHAPE)
    logits = target_logits(data)
    probs = np.exp(logits.astype(np.float64) - logits.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    assert np.allclose(probs, data.target_probs[:, :-1], atol=1e-6)
    seeds = row_seeds(data)
    assert len(set(seeds.tolist())) == data.batch and np.array_equal(row_seeds(data.rows(np.array([5, 2]))), seeds[[5, 2]])
    out = np.array([[7, 8, -1, -1], [7, 8, 9, 10], [3, -1, -1, -1]])
    unpacked = outcome_from_output(out)
    assert unpacked.accepted.tolist() == [1, 3, 0] and unpacked.final_ids.tolist() == [8, 10, 3]
    assert unpacked.emitted[0].tolist() == [7, 8, -1, -1]
