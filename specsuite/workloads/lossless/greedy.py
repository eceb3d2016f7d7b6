"""Greedy equality: at T=0 speculative decoding must reproduce the non-speculative output.

Each prompt's output from the server under test (at several concurrencies) is compared with the
reference's. At the first differing position the reference's own top logprobs decide what the
divergence is: "numerics" when the token the server under test chose is among the reference's
best `TOP_CANDIDATES` and within the near-tie tolerance of the reference's top (a near-tie that batch
shape or kernels can flip), else "real". Any real divergence fails the test.

The tolerance comes from the type the servers compute logits in (`near_tie_rule`): a top-2 gap
is a difference of two logits, each rounded to the type's step at its magnitude, and a
speculative verify (several tokens in one forward) rounds differently from a one-token decode,
as a batch of 8 does from a batch of 1. `ROUNDINGS` steps of the type at `LOGIT_MAGNITUDE` cover
one rounding on each side for logits below 32 (float16: 0.031 nats, bfloat16: 0.25; live H100
runs flipped ties at 0.0078 nats in float16 and 0.0625 and 0.125 in bfloat16, logits in [8, 16)).
float32 keeps the suite's long-standing 1e-3 nats, above its own step: reduction order still
differs between batch shapes. `--lossless-numerics-gap` overrides the table.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from specsuite.errors import SpecsuiteError
from specsuite.results.types import GreedyConcurrency, GreedyDivergence, NearTieRule
from specsuite.server.served_dtype import MANTISSA_BITS, UNKNOWN_FALLBACK, ServedDtype, coarser

DEFAULT_NUMERICS_GAP = 1e-3  # the float32 floor
LOGIT_MAGNITUDE = 16.0  # logits below 32: the type's step in [16, 32) is the largest they see
ROUNDINGS = 2  # verify and decode each round once
TOP_CANDIDATES = 5  # top logprobs a reference answer carries: a three-way tie can flip to the third

DivergenceKind = Literal["numerics", "real"]


def dtype_step(dtype: str, magnitude: float = LOGIT_MAGNITUDE) -> float:
    """One step (ULP) of `dtype` at `magnitude`: 2**(exponent - mantissa bits)."""
    return 2.0 ** (math.floor(math.log2(magnitude)) - MANTISSA_BITS[dtype])


@dataclass(frozen=True)
class NearTie:
    """How far below the reference's top a token may be and still be a numerics flip, and why."""

    dtype: str | None  # None: the tolerance was given (--lossless-numerics-gap)
    tolerance: float
    source: str

    def describe(self) -> str:
        kind = f"{self.dtype} " if self.dtype else ""
        return f"{kind}tolerance {self.tolerance:.3g} nats ({self.source})"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def record(self) -> NearTieRule:
        return NearTieRule.written(**asdict(self))


def near_tie_rule(dtype: str | None, source: str = "", override: float | None = None) -> NearTie:
    """The tolerance for logits computed in `dtype` (a key of MANTISSA_BITS; None: unknown), unless
    `override` (--lossless-numerics-gap) is given."""
    if override is not None:
        return NearTie(None, float(override), "--lossless-numerics-gap")
    if dtype is None:
        dtype, source = UNKNOWN_FALLBACK, source or "dtype unknown: assumed bfloat16"
    tolerance = max(ROUNDINGS * dtype_step(dtype), DEFAULT_NUMERICS_GAP)
    return NearTie(dtype, tolerance, source or dtype)


def near_tie_of(served: Sequence[ServedDtype], override: float | None = None) -> NearTie:
    """The rule for comparing servers of these types: the coarsest one's (each source named)."""
    if not served:
        return near_tie_rule(None, override=override)
    dtype = served[0].name
    for item in served[1:]:
        dtype = coarser(dtype, item.name)
    return near_tie_rule(dtype, "; ".join(dict.fromkeys(f"{s.name}: {s.source}" for s in served)), override)


def as_rule(tolerance: NearTie | float) -> NearTie:
    """A rule from a bare number (a tolerance given in nats) or the rule itself."""
    return tolerance if isinstance(tolerance, NearTie) else NearTie(None, float(tolerance), "given")


def top_entries(entries: Any) -> list[tuple[float, int]]:
    """(logprob, id) pairs, best first, from SGLang's per-position output_top_logprobs entry."""
    return [(float(t[0]), int(t[1])) for t in (entries or [])[:TOP_CANDIDATES]]


@dataclass(frozen=True)
class ReferenceOutput:
    """The reference's greedy output and, per position, its best tokens as (logprob, id) pairs, best
    first (at least two; up to TOP_CANDIDATES)."""

    output_ids: list[int]
    top: list[list[tuple[float, int]]]


@dataclass(frozen=True)
class Divergence:
    """Where and how one prompt's output left the reference's."""

    prompt_index: int
    position: int  # 1-based
    test_token: int | None  # None: the output ended here
    reference_token: int | None
    top2_gap: float | None  # None when the reference has no top-2 there
    kind: DivergenceKind
    reason: str
    below_top: float | None = None  # how far the test token sits below the reference's top (nats); None: not listed


def first_divergence(test: Sequence[int], reference: Sequence[int]) -> int | None:
    """0-based index of the first difference (a length difference counts), or None if equal."""
    for index, (a, b) in enumerate(zip(test, reference, strict=False)):
        if a != b:
            return index
    return None if len(test) == len(reference) else min(len(test), len(reference))


def classify(prompt_index: int, test: Sequence[int], reference: ReferenceOutput, tolerance: NearTie | float) -> Divergence | None:
    """None when the outputs are equal, else the first divergence and its kind."""
    rule = as_rule(tolerance)
    index = first_divergence(test, reference.output_ids)
    if index is None:
        return None
    test_token = test[index] if index < len(test) else None
    reference_token = reference.output_ids[index] if index < len(reference.output_ids) else None
    top = reference.top[index] if index < len(reference.top) else []
    gap = top[0][0] - top[1][0] if len(top) >= 2 else None
    below = next((top[0][0] - logprob for logprob, token in top if token == test_token), None)

    def divergence(kind: DivergenceKind, reason: str) -> Divergence:
        return Divergence(prompt_index, index + 1, test_token, reference_token, gap, kind, reason, below)

    if test_token is None or reference_token is None:
        return divergence("real", "one output ended early")
    if gap is None:
        return divergence("real", "the reference reported no top-2 here")
    if below is None:
        return divergence("real", f"not one of the reference's {len(top)} best tokens ({rule.describe()})")
    if below > rule.tolerance:
        what = "top-2 gap" if test_token == top[1][1] else "gap to this token"
        return divergence("real", f"the reference's {what} {below:.3g} nats is not a near-tie: above the {rule.describe()}")
    return divergence("numerics", f"near-tie: {below:.3g} nats below the reference's top, within the {rule.describe()}")


@dataclass
class GreedyResult:
    """Greedy equality at one concurrency."""

    concurrency: int
    prompts: int
    equal: int
    near_tie: NearTie
    divergences: list[Divergence] = field(default_factory=list)

    @property
    def real(self) -> int:
        return sum(d.kind == "real" for d in self.divergences)

    @property
    def numerics(self) -> int:
        return sum(d.kind == "numerics" for d in self.divergences)

    @property
    def passed(self) -> bool:
        return self.real == 0

    def record(self) -> GreedyConcurrency:
        """The result as results.json records it."""
        return GreedyConcurrency.written(
            concurrency=self.concurrency, prompts=self.prompts, equal=self.equal, numerics=self.numerics, real=self.real,
            passed=self.passed, numerics_gap=self.near_tie.tolerance, near_tie=self.near_tie.record(),
            divergences=[GreedyDivergence.written(**asdict(d)) for d in self.divergences])


def compare_greedy(
    concurrency: int, test_outputs: Sequence[Sequence[int]], references: Sequence[ReferenceOutput], tolerance: NearTie | float = DEFAULT_NUMERICS_GAP
) -> GreedyResult:
    """Compare every prompt's output with the reference's, in prompt order (`tolerance`: the near-tie
    rule, or a bare tolerance in nats)."""
    rule = as_rule(tolerance)
    if len(test_outputs) != len(references):
        raise SpecsuiteError(f"greedy equality: {len(test_outputs)} outputs against {len(references)} reference outputs")
    result = GreedyResult(concurrency, len(references), 0, rule)
    for index, (test, reference) in enumerate(zip(test_outputs, references, strict=True)):
        divergence = classify(index, test, reference, rule)
        if divergence is None:
            result.equal += 1
        else:
            result.divergences.append(divergence)
    return result
