"""The lossless tests aimed at over-acceptance (specsuite/families/lossless/directed.py), on a simulated
speculative sampler with a greedy draft: silent when it accepts with min(1, p/q), firing when it accepts
with min(1, c*p/q); roles from vLLM-shaped per-step stats. Seeds fixed."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specsuite.families.lossless.directed import (
    DirectedPosition,
    acceptance_betting_test,
    directed_positions,
    draft_sampling_of,
    token_roles,
    top_token_rate_test,
)
from specsuite.families.lossless.scoring import ScoredPosition
from specsuite.families.lossless.tempering import tempered

VOCAB = 40
DRAFTS = 3


def _target(rng: np.random.Generator) -> np.ndarray:
    logits = rng.normal(0, 2.0, VOCAB)
    logits[rng.integers(VOCAB)] += rng.uniform(0, 6)  # a mode of varying strength, like a small LM
    p = np.exp(logits - logits.max())
    return p / p.sum()


def _draft_token(p: np.ndarray, rng: np.random.Generator) -> int:
    """A greedy draft that agrees with the target's mode about three times in four."""
    return int(np.argmax(p)) if rng.random() < 0.75 else int(rng.choice(VOCAB, p=p))


def _simulate(c: float, positions: int, seed: int) -> list[DirectedPosition]:
    rng = np.random.default_rng(seed)
    found: list[DirectedPosition] = []

    def emit(p: np.ndarray, token: int, role: str) -> None:
        mode = int(np.argmax(p))
        found.append(DirectedPosition(float(p[mode]), token == mode, float(p[token]), role))

    while len(found) < positions:
        for _ in range(DRAFTS):  # one verify step
            p, draft = _target(rng), None
            draft = _draft_token(p, rng)
            if rng.random() < min(1.0, c * p[draft]):
                emit(p, draft, "accepted")
                continue
            rest = p.copy()
            rest[draft] = 0.0
            emit(p, int(rng.choice(VOCAB, p=rest / rest.sum())), "recovered")
            break
        else:
            p = _target(rng)
            emit(p, int(rng.choice(VOCAB, p=p)), "bonus")
    return found


def test_silent_on_a_correct_sampler_across_seeds():
    rate_p = [top_token_rate_test(_simulate(1.0, 3000, seed), 0.001).p_value for seed in range(20)]
    bet_p = [acceptance_betting_test(_simulate(1.0, 3000, seed), 0.001).p_value for seed in range(20)]
    assert min(rate_p) > 0.001 and min(bet_p) > 0.001
    assert sum(p < 0.05 for p in rate_p) <= 4 and sum(p < 0.05 for p in bet_p) <= 4  # roughly level, not skewed


def test_both_fire_on_over_acceptance():
    biased = _simulate(1.25, 3000, 7)
    rate, bet = top_token_rate_test(biased, 0.001), acceptance_betting_test(biased, 0.001)
    assert not rate.passed and rate.excess_rate_ci95[0] > 0
    assert not bet.passed and bet.mean_weighted_acceptance > 1.05


def test_roles_from_vllm_per_step_stats():
    spec = {"per_step_accepted": [0, 0, 0, 0, 0, 0, 1, 1, 0], "per_step_drafted": [3] * 9}
    roles = token_roles(12, spec)  # the finding's hand-run request: 12 tokens
    assert roles[0] == "prefill" and roles[1:7] == ["recovered"] * 6 and roles[7:11] == ["accepted", "recovered", "accepted", "recovered"]
    assert token_roles(5, {"per_step_accepted": [3, 3], "per_step_drafted": [3, 3]}) == ["prefill", "accepted", "accepted", "accepted", "bonus"]
    assert token_roles(12, {"per_step_accepted": [0], "per_step_drafted": [3]}) is None  # stats do not cover the output
    assert token_roles(3, None) is None and token_roles(3, {"per_step_accepted": [4], "per_step_drafted": [3]}) is None


def test_positions_from_a_scored_answer():
    raw = [ScoredPosition(7, (7, 9), (math.log(0.6), math.log(0.3)), math.log(0.6)),
           ScoredPosition(9, (7, 9), (math.log(0.5), math.log(0.4)), math.log(0.4))]
    scored = [None, *(tempered(p, 1.0, 10) for p in raw)]
    meta = {"vllm_speculative_decoding": {"per_step_accepted": [1], "per_step_drafted": [3]}}
    first, second = directed_positions(meta, [5, 7, 9], scored)
    assert first.is_mode and first.role == "accepted" and math.isclose(first.mode_prob, 0.6)
    assert not second.is_mode and second.role == "recovered" and math.isclose(second.own_prob, 0.4)
    assert directed_positions({}, [5, 7, 9], scored)[0].role is None


def test_positions_at_a_temperature_use_the_top_k_given_the_top_k():
    """At T = 0.5 the mode's probability given the top-K is exact: 0.6^2 / (0.6^2 + 0.3^2) = 0.8; a tail
    draw leaves the mode-rate test, and the drawn token's probability is its upper bound (the tail's weight
    is at most its raw mass 0.1 times p_K = 0.3)."""
    raw = ScoredPosition(7, (7, 9), (math.log(0.6), math.log(0.3)), math.log(0.6))
    tail = ScoredPosition(4, (7, 9), (math.log(0.6), math.log(0.3)), math.log(0.05))
    first, second = directed_positions({}, [5, 7, 4], [None, tempered(raw, 0.5, 10), tempered(tail, 0.5, 10)])
    assert math.isclose(first.mode_prob, 0.8) and first.in_mode_rate and 0.36 / (0.45 + 0.1 * 0.3) <= first.own_prob < 0.8
    assert not second.in_mode_rate and second.own_prob >= 0.05**2 / (0.6**2 + 0.3**2 + 0.1**2)


@pytest.mark.parametrize("n", [0, 5])
def test_too_few_positions_do_not_fail(n):
    assert top_token_rate_test(_simulate(1.0, n, 1)[:n], 0.001).passed
    assert acceptance_betting_test(_simulate(1.0, n, 1)[:n], 0.001).passed


def test_draft_sampling_is_read_where_the_server_reports_it():
    assert draft_sampling_of({"draft_sample_method": "probabilistic"}).greedy is False
    nested = draft_sampling_of({"speculative_config": '{"method": "eagle", "draft_sample_method": "probabilistic"}'})
    assert (nested.method, nested.source) == ("probabilistic", "server's speculative_config.draft_sample_method")
    assert draft_sampling_of({"speculative_config": {"draft_sample_method": "greedy"}}).greedy
    unreported = draft_sampling_of({"speculative_algorithm": "EAGLE"})
    assert unreported.greedy and "assumed" in unreported.source
