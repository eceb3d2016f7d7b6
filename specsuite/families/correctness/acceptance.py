"""Speculative acceptance: read it from SGLang's answers and check it against its physical bounds.

One server alone can only be held to bounds no correct verifier can leave (`accept_length_within_bounds`).
Whether acceptance is *too high* is not a single-server question: a correct rejection sampler
accepts a draft token with probability sum_x min(p(x), q(x)) = 1 - TV(p, q), which nothing short of
the draft's own distribution q bounds below 1, and it can rise with temperature (SGLang 0.5.17 with
EAGLE on an H100: accept length 2.6-2.9 at T=1 against 2.0 greedy on every correct arm). The recycled-draft_probs
bug's "acceptance climbs" signature is judged against a baseline arm instead: the A/B comparison
(specsuite/analysis/verdicts.py) calls a higher accept length "suspect" in an arm that is worse on a
corruption sign (invalid, fallback or padded-row ids, strays).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from specsuite.server.bench_answers import reported_accept_lengths
from specsuite.server.meta_info import MetaInfo

# Float slack for ratios SGLang computes in float64.
TOLERANCE = 1e-9


def request_accept_length(meta_info: dict[str, Any]) -> float | None:
    """Tokens per verify step for one finished request: `spec_accept_length`, else
    completion_tokens / spec_verify_ct. None when no verify step ran (spec off, max_new_tokens=1,
    or a streamed chunk before the last)."""
    meta = MetaInfo.parse(meta_info)
    value = meta.spec_accept_length
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    verify_ct = meta.spec_verify_ct
    completion = meta.completion_tokens
    if isinstance(verify_ct, int) and verify_ct > 0 and isinstance(completion, int):
        return completion / verify_ct
    return None


def server_accept_length(server_info: dict[str, Any]) -> float | None:
    """Lifetime accept length from /server_info: the mean of `internal_states[i].avg_spec_accept_length`
    over the DP ranks that report it, each rank weighted equally (the server does not report the
    per-rank verify counts that a weighted mean would need). None until the server has folded its
    first 40-iteration interval, or when spec decoding is off."""
    values = [float(value) for value in reported_accept_lengths(server_info) if isinstance(value, (int, float))]
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
