"""Statistical tests of the reference server's samplers (specsuite/refserver/sampling.py).

The chain rejection sampler must be lossless: whatever the draft distribution q, the committed
tokens follow the target distribution p.  We draw many chains over a small vocabulary and run a
chi-square goodness-of-fit test on the first committed token and on the second (given the first
was an accepted draft, with p and q for position 1 depending on that draft).  The fix arm's
sampler must pass; the no-fix sampler fed a q row that the graph pool's mask overwrote (0, then
-inf) must fail, and must emit the fallback id.  `renormalize_top_k_top_p` is checked against a
brute-force sort with SGLang's semantics: its sampler's joint top-k/top-p cut, and (joint=False)
its verify's top_k_renorm_prob then top_p_renorm_prob.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from specsuite.refserver.graph_pool import GraphMemoryPool
from specsuite.refserver.sampling import SamplerGuards, chain_rejection_sample, renormalize_top_k_top_p

VOCAB = 8
TOKENIZER_LENGTH = 7  # id 7 plays the padded, untrained row: zero mass in p and q
STEPS = 3
DRAWS = 200_000
FIT_ALPHA = 1e-3  # a correct sampler passes at this level (fixed seeds: the outcome is reproducible)
MISFIT_P = 1e-12  # a broken sampler must be rejected far beyond chance
CORRUPT_SEQ_LEN = 3  # the verify mask writes 0 over [0, 3) and -inf over [3, VOCAB)


def _normalised(weights: list[float]) -> np.ndarray:
    row = np.asarray(weights, dtype=np.float64)
    return row / row.sum()


# p has zeros inside q's support (as after top-p), so drafts get rejected where p is 0 and the
# residual pass runs; id 7 carries no mass anywhere.
P0 = _normalised([0.0, 3, 1, 4, 0.5, 2, 1.5, 0])
Q0 = _normalised([2.0, 1, 3, 1, 2, 0.5, 0.5, 0])
P_LATER = _normalised([1.0, 0, 2, 2, 3, 0.5, 1.5, 0])
Q_LATER = _normalised([1.0, 2, 1, 0.5, 1, 3, 1.5, 0])


def _prefix_dependent_rows(base: np.ndarray, seed: int) -> np.ndarray:
    """(VOCAB, VOCAB) table: row a is the distribution after the draft a (zeros kept)."""
    rng = np.random.default_rng(seed)
    table = base[None, :] * rng.uniform(0.3, 1.7, size=(VOCAB, VOCAB))
    return table / table.sum(axis=1, keepdims=True)


P1 = _prefix_dependent_rows(P_LATER, 11)
Q1 = _prefix_dependent_rows(Q_LATER, 12)


def _draw(rows: np.ndarray, coins: np.ndarray) -> np.ndarray:
    """Inverse-CDF draw of one id per row of `rows`."""
    cdf = np.cumsum(rows, axis=1)
    return np.minimum((cdf <= coins[:, None] * cdf[:, -1:]).sum(axis=1), rows.shape[1] - 1)


def _chains(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.random.Generator]:
    """DRAWS chains of STEPS drafts sampled from q; returns (target_probs, draft_probs, draft_ids, rng)."""
    rng = np.random.default_rng(seed)
    target = np.empty((DRAWS, STEPS + 1, VOCAB))
    draft = np.empty((DRAWS, STEPS, VOCAB), dtype=np.float32)  # the engine's draft_probs dtype
    ids = np.empty((DRAWS, STEPS), dtype=np.int64)
    target[:, 0], draft[:, 0] = P0, Q0
    ids[:, 0] = _draw(np.broadcast_to(Q0, (DRAWS, VOCAB)), rng.random(DRAWS))
    target[:, 1], draft[:, 1] = P1[ids[:, 0]], Q1[ids[:, 0]]
    ids[:, 1] = _draw(Q1[ids[:, 0]], rng.random(DRAWS))
    for step in range(2, STEPS):
        target[:, step], draft[:, step] = P_LATER, Q_LATER
        ids[:, step] = _draw(np.broadcast_to(Q_LATER, (DRAWS, VOCAB)), rng.random(DRAWS))
    target[:, STEPS] = P_LATER
    return target, draft, ids, rng


def _committed(target, draft_seen, ids, rng, guards: SamplerGuards, bias_accept: float = 0.0, accept_inflation: float = 1.0):
    """Run the sampler; return (first committed id, second committed id or -1, result)."""
    result = chain_rejection_sample(target, draft_seen, ids, rng.random((DRAWS, STEPS)), rng.random(DRAWS), guards, bias_accept,
                                    accept_inflation)
    accepted = result.accepted_drafts
    first = np.where(accepted >= 1, ids[:, 0], result.final_ids)
    second = np.full(DRAWS, -1, dtype=np.int64)
    second[accepted >= 2] = ids[accepted >= 2, 1]
    second[accepted == 1] = result.final_ids[accepted == 1]
    return first, second, result


def _fit_p_value(observed: np.ndarray, expected: np.ndarray) -> float:
    """Chi-square p-value over the cells with expected mass; observed mass elsewhere fails at once."""
    support = expected > 0
    if observed[~support].sum() > 0:
        return 0.0
    dof_adjust = observed.shape[0] - 1 if observed.ndim == 2 else 0  # one fitted total per row
    return float(stats.chisquare(observed[support], expected[support], ddof=dof_adjust).pvalue)


def _first_token_p_value(first: np.ndarray) -> float:
    observed = np.bincount(first, minlength=VOCAB).astype(np.float64)
    return _fit_p_value(observed, P0 * len(first))


def _second_token_p_value(first: np.ndarray, second: np.ndarray) -> float:
    """Given the first draft was accepted as a, the second committed id must follow P1[a]."""
    both = second >= 0
    observed = np.zeros((VOCAB, VOCAB))
    np.add.at(observed, (first[both], second[both]), 1.0)
    expected = observed.sum(axis=1, keepdims=True) * P1
    keep = observed.sum(axis=1) > 0
    return _fit_p_value(observed[keep], expected[keep])


FIX_GUARDS = SamplerGuards(enabled=True, tokenizer_length=TOKENIZER_LENGTH)
NOFIX_GUARDS = SamplerGuards(enabled=False, tokenizer_length=TOKENIZER_LENGTH)


@pytest.fixture(scope="module")
def fix_arm_draws():
    target, draft, ids, rng = _chains(seed=2024)
    return ids, _committed(target, draft, ids, rng, FIX_GUARDS)


def test_fix_sampler_first_token_follows_target(fix_arm_draws):
    _, (first, _, _) = fix_arm_draws
    assert _first_token_p_value(first) > FIT_ALPHA


def test_fix_sampler_second_token_follows_target_given_first(fix_arm_draws):
    _, (first, second, _) = fix_arm_draws
    assert (second >= 0).sum() > DRAWS // 4, "too few chains reached a second committed token"
    assert _second_token_p_value(first, second) > FIT_ALPHA


def test_fix_sampler_never_falls_back_or_leaves_the_tokenizer(fix_arm_draws):
    _, (first, second, result) = fix_arm_draws
    assert not result.fallback.any()
    assert not result.guard_replaced.any()
    assert result.final_ids.max() < TOKENIZER_LENGTH
    assert (result.accepted_drafts < STEPS).any() and (result.accepted_drafts == STEPS).any(), "both paths must run"


def test_biased_accept_rule_is_detected():
    """The test has power: the server's --bias-accept knob (coin < p/q + 0.3) must be caught."""
    target, draft, ids, rng = _chains(seed=2025)
    first, _, _ = _committed(target, draft, ids, rng, FIX_GUARDS, bias_accept=0.3)
    assert _first_token_p_value(first) < MISFIT_P


def test_inflated_accept_rule_accepts_more_and_is_detected():
    """The --accept-inflation knob (coin < 1.25 p/q): more drafts accepted on the same coins, none fewer, no fallback
    id and no guard at work (no corruption sign), and the committed tokens no longer follow the target."""
    target, draft, ids, rng = _chains(seed=2027)
    state = rng.bit_generator.state
    _, _, exact = _committed(target, draft, ids, rng, FIX_GUARDS)
    rng.bit_generator.state = state  # the same coins
    first, _, inflated = _committed(target, draft, ids, rng, FIX_GUARDS, accept_inflation=1.25)
    assert (inflated.accepted_drafts >= exact.accepted_drafts).all()
    assert inflated.accepted_drafts.mean() > exact.accepted_drafts.mean()
    assert not inflated.fallback.any() and not inflated.guard_replaced.any()
    assert _first_token_p_value(first) < MISFIT_P


def _corrupted_q(draft: np.ndarray, aliased_step: int) -> np.ndarray:
    """q as the no-fix sampler reads it: a pool view that the verify mask then overwrote."""
    pool = GraphMemoryPool(DRAWS, STEPS, VOCAB, aliased_step)
    view = pool.replay_draft(draft)
    pool.replay_verify(np.full(DRAWS, CORRUPT_SEQ_LEN))
    expected_row = np.where(np.arange(VOCAB) < CORRUPT_SEQ_LEN, 0.0, -np.inf)
    assert np.array_equal(view[:, aliased_step], np.broadcast_to(expected_row, (DRAWS, VOCAB)))
    return view


@pytest.mark.parametrize("aliased_step", [0, 1])
def test_nofix_sampler_with_corrupted_q_misses_target(aliased_step):
    target, draft, ids, rng = _chains(seed=2026 + aliased_step)
    first, second, result = _committed(target, _corrupted_q(draft, aliased_step), ids, rng, NOFIX_GUARDS)
    clean = ~result.fallback  # the distribution is wrong even where no fallback id was emitted
    if aliased_step == 0:
        assert _first_token_p_value(first) < MISFIT_P
        assert _first_token_p_value(first[clean]) < MISFIT_P
    else:
        assert _first_token_p_value(first) > FIT_ALPHA, "steps before the aliased one stay exact"
        assert _second_token_p_value(first, second) < MISFIT_P
        assert _second_token_p_value(first[clean], second[clean]) < MISFIT_P
    # A draft with q = 0 and p = 0 is rejected; the residual (p - (-inf))+ is inf, the
    # cumulative search never passes coin * inf, and the kernel commits vocab_size - 1.
    assert result.fallback.any()
    assert (result.final_ids[result.fallback] == VOCAB - 1).all()


# --------------------------------------------------------------------------- top-k / top-p
def _brute_top_k_top_p(probs: np.ndarray, top_k: np.ndarray, top_p: np.ndarray, joint: bool = True) -> np.ndarray:
    """joint (SGLang's sampler, srt/layers/sampler.py:435-439, 820-827): the top-k and the smallest
    most-probable prefix whose mass reaches top_p, both cut on the row as given.  joint=False (SGLang
    0.5.23's verify, srt/speculative/eagle_utils.py:728-745): top_k_renorm_prob, then
    top_p_renorm_prob on the renormalised row.  No ties in the inputs."""
    out = np.zeros_like(probs)
    for row, (p, k, nucleus) in enumerate(zip(probs, top_k, top_p, strict=False)):
        order = np.argsort(-p)
        ranked = p[order]
        size = min(int(k), len(p))
        if nucleus < 1.0:
            basis = ranked / ranked.sum() if joint else ranked[:size] / ranked[:size].sum()
            size = min(size, int(np.searchsorted(np.cumsum(basis), nucleus)) + 1)
        out[row, order[:size]] = ranked[:size] / ranked[:size].sum()
    return out


def _random_rows(rng: np.random.Generator, rows: int, vocab: int, peaked: bool) -> np.ndarray:
    """Distinct-valued rows: peaked (nucleus among a few ids) or flat (nucleus of hundreds)."""
    logits = rng.normal(scale=4.0 if peaked else 0.5, size=(rows, vocab))
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    return probs / probs.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("vocab", [8, 300, 8128])
@pytest.mark.parametrize("peaked", [True, False])
def test_top_p_only_matches_brute_force(vocab, peaked):
    rng = np.random.default_rng(vocab + peaked)
    probs = _random_rows(rng, 12, vocab, peaked)
    top_p = rng.uniform(0.05, 0.99, size=12)
    top_k = np.full(12, 1 << 30)
    got = renormalize_top_k_top_p(probs, top_k, top_p)
    np.testing.assert_allclose(got, _brute_top_k_top_p(probs, top_k, top_p), rtol=1e-12, atol=0)


@pytest.mark.parametrize("vocab", [8, 300, 8128])
def test_top_k_only_matches_brute_force(vocab):
    rng = np.random.default_rng(vocab)
    probs = _random_rows(rng, 12, vocab, peaked=False)
    top_k = rng.integers(1, min(vocab, 600), size=12)
    top_p = np.ones(12)
    got = renormalize_top_k_top_p(probs, top_k, top_p)
    np.testing.assert_allclose(got, _brute_top_k_top_p(probs, top_k, top_p), rtol=1e-12, atol=0)


def test_top_k_and_top_p_cut_jointly_as_sglangs_sampler():
    """Changed on purpose: the nucleus was cut on the top-k-renormalised row, which is SGLang's verify,
    not its sampler; the engine now cuts jointly in both paths (joint=False is a fault arm of the verify)."""
    probs = np.array([[0.4, 0.3, 0.2, 0.1]])
    top_k, top_p = np.array([2]), np.array([0.5])
    joint = renormalize_top_k_top_p(probs, top_k, top_p)
    np.testing.assert_allclose(joint, _brute_top_k_top_p(probs, top_k, top_p))
    np.testing.assert_allclose(joint, [[4 / 7, 3 / 7, 0, 0]])
    sequential = renormalize_top_k_top_p(probs, top_k, top_p, joint=False)
    np.testing.assert_allclose(sequential, _brute_top_k_top_p(probs, top_k, top_p, joint=False))
    np.testing.assert_allclose(sequential, [[1, 0, 0, 0]])


@pytest.mark.parametrize("joint", [True, False])
def test_top_k_with_top_p_matches_brute_force(joint):
    rng = np.random.default_rng(11 + joint)
    probs = _random_rows(rng, 24, 300, peaked=True)
    top_k = rng.integers(1, 12, size=24)
    top_p = rng.uniform(0.05, 0.99, size=24)
    got = renormalize_top_k_top_p(probs, top_k, top_p, joint=joint)
    np.testing.assert_allclose(got, _brute_top_k_top_p(probs, top_k, top_p, joint=joint), rtol=1e-12, atol=0)


def test_rows_without_truncation_pass_through_unchanged():
    rng = np.random.default_rng(5)
    probs = _random_rows(rng, 4, 300, peaked=True)
    top_k = np.array([1 << 30, 300, 1 << 30, 2])
    top_p = np.array([1.0, 1.0, 0.5, 1.0])
    got = renormalize_top_k_top_p(probs, top_k, top_p)
    np.testing.assert_array_equal(got[:2], probs[:2])
    np.testing.assert_allclose(got[2:], _brute_top_k_top_p(probs[2:], top_k[2:], top_p[2:]), rtol=1e-12, atol=0)
