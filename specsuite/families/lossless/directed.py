"""Tests aimed at one alternative: a sampler that accepts drafts too often.

A speculative sampler that accepts draft x with min(1, c*p/q), c > 1, instead of min(1, p/q) moves
probability toward the draft's token, and the draft's token is mostly the target's mode. The omnibus
PIT spreads its power over every shape of departure; these two tests spend it on this one.

1. **Top-token rate** (any server, any correct sampler). At each scored position t >= 2 the target
   gives pi_t = p_t(mode) (the scoring request's top-1, exact), and I_t = [x_t is the mode]. Given the
   prefix, E[I_t] = pi_t for an exact sampler, so S = sum(I_t - pi_t) is a martingale with predictable
   variance V = sum(pi_t (1 - pi_t)); z = S / sqrt(V), two-sided.  Over-acceptance moves mass toward the
   draft's token: with a greedy draft (vLLM's default) mostly the target's mode, so the mode is over-drawn; with a
   draft sampled from q (SGLang's EAGLE with rejection sampling, the reference server) toward tokens with q > p, away
   from a mode the draft under-rates, so the mode is under-drawn (the reference server's `--accept-inflation 1.25`:
   z about -3.3 at the suite's sizes, tools/calibration/README.md).
   Over thousands of positions with bounded increments the normal limit is accurate; the effect is
   reported as (observed - expected) / n with a 95% interval.

2. **Acceptance betting** (a greedy draft only: vLLM's default `draft_sample_method` "greedy",
   `vllm/config/speculative.py:600`, so q is one-hot and a correct sampler accepts draft x with
   probability p(x); needs per-step acceptance stats, vLLM's `--per-request-spec-decode-metrics
   detailed`). A sampled draft ("probabilistic": q is the draft's distribution) accepts x with
   min(1, p/q), so E[A/p] is not 1 there and the test does not apply (`draft_sampling_of`). At a
   draft-evaluated position (an accepted draft, or the recovered token after a rejection) let A_t = 1
   when the token is an accepted draft. The recovered token is never the draft (max(0, p - q) is 0
   there), so E[A_t / p_t(x_t)] = p(draft) / p(draft) = 1 exactly, whatever the draft was; under the
   bias it is min(c, 1/p) > 1. M = prod(1 + lambda_t (A_t / p_t(x_t) - 1)) with a predictable
   lambda_t in [0, 1) is then a nonnegative martingale of mean 1 (a test martingale), and Ville's
   inequality gives P(M ever >= 1/alpha) <= alpha: valid at any sample size, so more requests can be
   added while the evidence is unclear (sequential sampling). lambda_t is the growth-optimal
   bet for c = 1.25 if the draft were the mode: (c - 1) pi / (1 - pi), capped at 0.5.

Positions come from `directed_positions` (one request's answer and its scoring, tempered to the
request's temperature: specsuite/families/lossless/tempering.py). p_t must be the distribution the
server samples from, so only top_p 1 settings are pooled.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from specsuite.families.lossless.records import AcceptanceBetting, TopTokenRate
from specsuite.families.lossless.tempering import TemperedPosition
from specsuite.server.meta_info import MetaInfo, VllmStepStats
from specsuite.stats.lazy_scipy import stats

DESIGN_C = 1.25  # the bias the betting fraction is tuned to
MAX_BET = 0.5
MIN_POSITIONS = 20


@dataclass(frozen=True)
class DirectedPosition:
    """What the two tests need from one scored position."""

    mode_prob: float  # pi_t, the target's top-1 probability
    is_mode: bool  # the drawn token is the target's top-1
    own_prob: float  # p_t(x_t), the drawn token's probability
    role: str | None  # prefill, accepted, recovered, bonus; None without per-step stats
    in_mode_rate: bool = True  # counted by the mode-rate test (a tail draw is not, where it is taken given the top-K)


GREEDY_DRAFT = "greedy"


@dataclass(frozen=True)
class DraftSampling:
    """How the draft picks its tokens (vLLM's `draft_sample_method`) and where that was read."""

    method: str
    source: str

    @property
    def greedy(self) -> bool:
        return self.method == GREEDY_DRAFT


def draft_sampling_of(server_args: dict[str, Any]) -> DraftSampling:
    """`draft_sample_method` from what the server reports: a flat key, or inside `speculative_config` (vLLM's
    config, a mapping or its JSON text, as a development-mode /server_info dumps it). vLLM's production HTTP API
    reports none (docs/vllm_api_facts.md); then its default, greedy (`vllm/config/speculative.py:600`), stated
    as assumed. SGLang's drafts are the draft model's top-k picks, greedy (no such argument)."""
    found = server_args.get("draft_sample_method")
    source = "draft_sample_method"
    nested = server_args.get("speculative_config")
    if found is None and isinstance(nested, str):
        try:
            nested = json.loads(nested)
        except ValueError:
            nested = None
    if found is None and isinstance(nested, dict):
        found, source = nested.get("draft_sample_method"), "speculative_config.draft_sample_method"
    if found is None:
        return DraftSampling(GREEDY_DRAFT, "not reported by the server: vLLM's default (config/speculative.py:600) assumed")
    return DraftSampling(str(found).strip().lower(), f"server's {source}")


def token_roles(num_tokens: int, spec: Any) -> list[str] | None:
    """Each output token's origin from vLLM's per-step stats: the prefill token, then per step the
    accepted drafts and one more (recovered after a rejection, the bonus when all were accepted).
    None when the stats are absent or do not cover the output (a trimmed last step is fine)."""
    stats = VllmStepStats.parse(spec) if isinstance(spec, dict) else None
    if stats is None:
        return None
    accepted, drafted = stats.per_step_accepted, stats.per_step_drafted
    if not isinstance(accepted, list) or not isinstance(drafted, list) or len(accepted) != len(drafted):
        return None
    roles = ["prefill"]
    for count, proposed in zip(accepted, drafted, strict=True):
        if not isinstance(count, int) or not isinstance(proposed, int) or not 0 <= count <= proposed:
            return None
        roles += ["accepted"] * count + ["recovered" if count < proposed else "bonus"]
    return roles[:num_tokens] if len(roles) >= num_tokens else None


def directed_positions(meta: dict[str, Any], output: Sequence[int], scored: Sequence[TemperedPosition | None]) -> list[DirectedPosition]:
    """The scored positions (>= 2) of one request, with their roles when the server gave per-step stats.
    `scored` is the tempered scoring list for `output` (None at position 1).

    Where the tail's weight is known only within bounds (T != 1), the mode rate is taken given that
    the token is in the top-K (exact; tail draws leave it), and the drawn token's probability is its
    upper bound, which turns the betting martingale into a supermartingale: still a valid test."""
    roles = token_roles(len(output), MetaInfo.parse(meta).vllm_speculative_decoding)
    found = []
    for index, position in enumerate(scored):
        if position is None or position.token_weight is None or not position.top_ids:
            continue
        if position.exact:
            mode_prob, in_mode_rate = position.probability_bounds(float(position.top_weights[0]))[0], True
        else:
            mode_prob, in_mode_rate = float(position.top_weights[0]) / position.top_weight, position.rank is not None
        found.append(DirectedPosition(mode_prob=mode_prob, is_mode=position.token_id == position.top_ids[0],
                                      own_prob=position.probability_bounds(position.token_weight)[1],
                                      role=roles[index] if roles else None, in_mode_rate=in_mode_rate))
    return found


def top_token_rate_test(positions: Iterable[DirectedPosition], alpha: float) -> TopTokenRate:
    """Test 1: is the target's mode drawn at the rate the target says (two-sided)?"""
    chosen = [p for p in positions if p.in_mode_rate]
    n = len(chosen)
    observed = sum(p.is_mode for p in chosen)
    expected = sum(p.mode_prob for p in chosen)
    variance = sum(p.mode_prob * (1 - p.mode_prob) for p in chosen)
    z = (observed - expected) / math.sqrt(variance) if variance > 0 else 0.0
    p_value = float(2.0 * stats.norm.sf(abs(z))) if n >= MIN_POSITIONS else 1.0
    half = float(stats.norm.ppf(0.975)) * math.sqrt(variance) / n if n else float("nan")
    z_alpha, z_power = float(stats.norm.isf(alpha / 2.0)), float(stats.norm.ppf(0.8))
    return TopTokenRate.written(
        n=n, observed=observed, expected=expected, z=z, p_value=p_value, alpha=alpha,
        passed=p_value >= alpha,
        excess_rate=(observed - expected) / n if n else None,
        excess_rate_ci95=[(observed - expected) / n - half, (observed - expected) / n + half] if n else None,
        # smallest excess per position detected with 80% power (normal approximation, null variance)
        mde_excess_rate=(z_alpha + z_power) * math.sqrt(variance) / n if n else None,
    )


def betting_fraction(mode_prob: float, design_c: float = DESIGN_C) -> float:
    """lambda_t: the growth-optimal bet against c = design_c for a draft of probability mode_prob, capped."""
    if mode_prob >= 1.0:
        return MAX_BET
    return min(MAX_BET, (design_c - 1.0) * mode_prob / (1.0 - mode_prob))


def acceptance_betting_test(positions: Iterable[DirectedPosition], alpha: float) -> AcceptanceBetting:
    """Test 2: the test martingale of A_t / p_t(x_t) over draft-evaluated positions (greedy drafts)."""
    log_wealth, n, accepted, weighted = 0.0, 0, 0, 0.0
    max_log_wealth = 0.0
    for position in positions:
        if position.role not in ("accepted", "recovered"):
            continue
        n += 1
        ratio = 1.0 / max(position.own_prob, 1e-300) if position.role == "accepted" else 0.0
        accepted += position.role == "accepted"
        weighted += ratio
        log_wealth += math.log1p(betting_fraction(position.mode_prob) * (ratio - 1.0))
        max_log_wealth = max(max_log_wealth, log_wealth)
    # Ville: P(sup M >= 1/alpha) <= alpha, so 1/max M is a valid p-value (anytime).
    p_value = min(1.0, math.exp(-max_log_wealth))
    return AcceptanceBetting.written(
        draft_positions=n, accepted=accepted, mean_weighted_acceptance=weighted / n if n else None,
        log_e_value=log_wealth, max_log_e_value=max_log_wealth, p_value=p_value, alpha=alpha,
        passed=p_value >= alpha, applicable=n >= MIN_POSITIONS,
    )
