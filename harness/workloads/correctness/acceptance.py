"""Speculative acceptance: read it from SGLang's answers and check it for the founding bug's signature.

A broken verify step (seed bug: corrupt draft probabilities accepted unconditionally) makes
acceptance *rise* with temperature and approach its ceiling, which reads as a good draft model.
In practice healthy acceptance at T > 0 is no higher than greedy's, so a rise is the alarm.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy import stats

# Float slack for ratios SGLang computes in float64.
TOLERANCE = 1e-9


def request_accept_length(meta_info: dict[str, Any]) -> float | None:
    """Tokens per verify step for one finished request: `spec_accept_length`, else
    completion_tokens / spec_verify_ct. None when no verify step ran (spec off, max_new_tokens=1,
    or a streamed chunk before the last)."""
    value = meta_info.get("spec_accept_length")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    verify_ct = meta_info.get("spec_verify_ct")
    completion = meta_info.get("completion_tokens")
    if isinstance(verify_ct, int) and verify_ct > 0 and isinstance(completion, int):
        return completion / verify_ct
    return None


def server_accept_length(server_info: dict[str, Any]) -> float | None:
    """Lifetime accept length from /server_info: the mean of `internal_states[i].avg_spec_accept_length`
    over the DP ranks that report it, each rank weighted equally (the server does not report the
    per-rank verify counts that a weighted mean would need). None until the server has folded its
    first 40-iteration interval, or when spec decoding is off."""
    states = server_info.get("internal_states")
    if not isinstance(states, list):
        return None
    values = [
        float(s["avg_spec_accept_length"])
        for s in states
        if isinstance(s, dict) and isinstance(s.get("avg_spec_accept_length"), (int, float))
    ]
    return float(np.mean(values)) if values else None


def max_accept_length(num_draft_tokens: int, verify_ct: int | None = None) -> float:
    """Largest legal `spec_accept_length`. Each verify step commits at most num_draft_tokens tokens
    (accepted drafts + the bonus token), and completion_tokens also counts the first token, which
    comes from prefill, so completion_tokens / v ≤ (1 + v·draft) / v = draft + 1/v. Without v the
    bound is its worst case v = 1: draft + 1."""
    return num_draft_tokens + 1.0 / verify_ct if verify_ct else num_draft_tokens + 1.0


@dataclass
class BoundsCheck:
    """Accept lengths outside [1, max_accept_length]; `violations` holds (index, value, bound)."""

    n: int
    num_draft_tokens: int
    violations: list[tuple[int, float, float]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.violations

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "passed": self.passed}


def accept_length_within_bounds(
    values: Sequence[float], num_draft_tokens: int, verify_cts: Sequence[int | None] | None = None
) -> BoundsCheck:
    """Every accept length must be ≥ 1 (each verify commits at least the bonus token) and at most
    `max_accept_length`, tightened per value when its spec_verify_ct is given. For a lower bound 1
    is stated loosely: the prefill token makes the true minimum (v + 1) / v."""
    if verify_cts is not None and len(verify_cts) != len(values):
        raise ValueError("verify_cts must align with values")
    check = BoundsCheck(n=len(values), num_draft_tokens=num_draft_tokens)
    for i, value in enumerate(values):
        bound = max_accept_length(num_draft_tokens, verify_cts[i] if verify_cts is not None else None)
        if not (1.0 - TOLERANCE <= value <= bound + TOLERANCE):
            check.violations.append((i, float(value), bound))
    return check


@dataclass
class TemperatureTrend:
    """One-sided Mann–Whitney test of accept lengths at T > 0 against T = 0."""

    n_greedy: int
    n_sampled: int
    median_greedy: float | None
    median_sampled: float | None
    statistic: float | None
    p_value: float | None
    alpha: float
    verdict: str  # "rises" (suspicious), "no rise", or "insufficient data"

    @property
    def rises(self) -> bool:
        return self.verdict == "rises"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def acceptance_rises_with_temperature(
    accept_lengths_t0: Sequence[float], accept_lengths_t: Sequence[float], alpha: float = 0.05
) -> TemperatureTrend:
    """Test H1: accept lengths at T > 0 are stochastically greater than at T = 0.

    With a healthy verifier, acceptance at T > 0 is in practice no higher than at T = 0 (sampling
    spreads both distributions, so draft and target agree less often); the seed bug made it climb
    toward its ceiling, so a significant rise means the verifier accepts what it should reject.
    """
    greedy = np.asarray(accept_lengths_t0, dtype=float)
    sampled = np.asarray(accept_lengths_t, dtype=float)
    medians = (
        float(np.median(greedy)) if greedy.size else None,
        float(np.median(sampled)) if sampled.size else None,
    )
    if greedy.size == 0 or sampled.size == 0:
        return TemperatureTrend(greedy.size, sampled.size, *medians, None, None, alpha, "insufficient data")
    result = stats.mannwhitneyu(sampled, greedy, alternative="greater")
    p_value = float(result.pvalue)
    verdict = "rises" if p_value < alpha else "no rise"
    return TemperatureTrend(greedy.size, sampled.size, *medians, float(result.statistic), p_value, alpha, verdict)


# An acceptance rate this high on prose sampled at this temperature or above is too good to be true.
SUSPICIOUS_ACCEPT_RATE = 0.95
SUSPICIOUS_MIN_TEMPERATURE = 0.7


def suspicious_acceptance_rate(
    rate: float | None, temperature: float, threshold: float = SUSPICIOUS_ACCEPT_RATE, min_temperature: float = SUSPICIOUS_MIN_TEMPERATURE
) -> bool:
    """Flag a draft acceptance rate (spec_accept_rate) at or above `threshold` on prose sampled at
    `temperature` ≥ `min_temperature`: no real draft model agrees that well with a sampled target."""
    return rate is not None and temperature >= min_temperature and rate >= threshold
