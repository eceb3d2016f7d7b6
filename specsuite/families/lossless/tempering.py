"""The target's distribution at the sampling temperature, from the raw top-K a scoring request returns.

SGLang and vLLM report prompt (input) logprobs before temperature: log_softmax(logits), whatever the
request's temperature (docs/logprob_semantics.md has the source lines). A server sampling at T draws
from p_T(i) = p(i)^(1/T) / Z_T, so the harness applies the temperature itself. From the top-K alone,
the top-K weights w_i = p(i)^(1/T) are exact, but the tail's weight B = sum over the other ids of
p(j)^(1/T) is not: only its raw mass R = 1 - sum of the top-K and a cap p_K (the K-th probability) on
each of its n = vocab_size - K ids are known. With a = 1/T:

- a > 1 (T < 1): p^a <= p * p_K^(a-1) gives B <= R p_K^(a-1); convexity (Jensen) gives B >= n (R/n)^a.
- a < 1 (T > 1): concavity gives B <= n (R/n)^a; p^(a-1) >= p_K^(a-1) gives B >= R p_K^(a-1).
- a = 1: B = R exactly.

Everything that needs only ratios of top-K weights (the distribution given that the token is in the
top-K, a nucleus inside the top-K) is exact; what needs Z_T (a token's unconditional probability, the
tail's mass) comes with the interval these bounds give.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from specsuite.families.lossless.scoring import ScoredPosition


@dataclass(frozen=True)
class TemperedPosition:
    """One scored position at temperature T. `top_weights` are p(i)^(1/T) for `top_ids` (most likely
    first, ties by id), scaled so that the largest is 1; `tail_low`/`tail_high` bound the tail's weight on
    the same scale; `token_weight` is the drawn token's weight (None when the server gave no logprob)."""

    token_id: int
    top_ids: tuple[int, ...]
    top_weights: np.ndarray
    tail_low: float
    tail_high: float
    token_weight: float | None

    @property
    def top_weight(self) -> float:
        return float(self.top_weights.sum())

    @property
    def rank(self) -> int | None:
        """The drawn token's place in the top-K, None when it is in the tail."""
        return self.top_ids.index(self.token_id) if self.token_id in self.top_ids else None

    @property
    def exact(self) -> bool:
        """The tail's weight is known exactly (T = 1, or no tail)."""
        return self.tail_low == self.tail_high

    def tail_mass_bounds(self) -> tuple[float, float]:
        """The tail's probability at T: [low, high]."""
        top = self.top_weight
        return self.tail_low / (top + self.tail_low), self.tail_high / (top + self.tail_high)

    def probability_bounds(self, weight: float) -> tuple[float, float]:
        """The probability at T of an id of weight `weight`: [low, high]."""
        top = self.top_weight
        return weight / (top + self.tail_high), weight / (top + self.tail_low)


def tempered(position: ScoredPosition, temperature: float, vocab_size: int | None) -> TemperedPosition:
    """`position` (raw logprobs) at `temperature` > 0. `vocab_size` None: the tail's size is unknown,
    which leaves the bound that needs it open (0 below, infinity above)."""
    order = sorted(range(len(position.top_ids)), key=lambda i: (-position.top_logprobs[i], position.top_ids[i]))
    ids = tuple(position.top_ids[i] for i in order)
    logprobs = np.array([position.top_logprobs[i] for i in order], dtype=np.float64)
    a = 1.0 / temperature
    top_logprob = float(logprobs[0]) if len(logprobs) else 0.0
    weights = np.exp(a * (logprobs - top_logprob))
    raw_tail = max(0.0, 1.0 - float(np.exp(logprobs).sum()))
    low, high = _tail_weight_bounds(raw_tail, float(logprobs[-1]) if len(logprobs) else 0.0, a,
                                    None if vocab_size is None else max(0, vocab_size - len(ids)))
    scale = math.exp(-a * top_logprob)
    own = position.token_logprob
    return TemperedPosition(
        token_id=position.token_id,
        top_ids=ids,
        top_weights=weights,
        tail_low=low * scale,
        tail_high=high * scale,
        token_weight=None if own is None else math.exp(a * (own - top_logprob)),
    )


def _tail_weight_bounds(raw_tail: float, last_logprob: float, a: float, tail_size: int | None) -> tuple[float, float]:
    """Bounds on sum over the tail of p^a (unscaled), from its raw mass, the cap p_K = exp(last_logprob)
    and its size n (None: unknown)."""
    if raw_tail <= 0.0 or tail_size == 0:
        return 0.0, 0.0
    if a == 1.0:
        return raw_tail, raw_tail
    capped = raw_tail * math.exp((a - 1.0) * last_logprob)  # R p_K^(a-1)
    spread = None if tail_size is None else tail_size * (raw_tail / tail_size) ** a  # n (R/n)^a
    if a > 1.0:
        return (0.0 if spread is None else min(spread, capped)), capped
    return capped, (math.inf if spread is None else max(spread, capped))
