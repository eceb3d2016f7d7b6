"""Greedy equality: at T=0 speculative decoding must reproduce the non-speculative output.

Each prompt's output from the server under test (at several concurrencies) is compared with the
reference's. At the first differing position the reference's own top-2 logprobs decide what the
divergence is: "numerics" when the two best tokens are within `numerics_gap` nats and the server
under test chose one of them (a near-tie that batch shape or kernels can flip), else "real".
Any real divergence fails the test.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from harness.errors import SpecsuiteError

DEFAULT_NUMERICS_GAP = 1e-3

DivergenceKind = Literal["numerics", "real"]


@dataclass(frozen=True)
class ReferenceOutput:
    """The reference's greedy output and, per position, its top-2 as (logprob, id) pairs."""

    output_ids: list[int]
    top2: list[list[tuple[float, int]]]


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


def first_divergence(test: Sequence[int], reference: Sequence[int]) -> int | None:
    """0-based index of the first difference (a length difference counts), or None if equal."""
    for index, (a, b) in enumerate(zip(test, reference, strict=False)):
        if a != b:
            return index
    return None if len(test) == len(reference) else min(len(test), len(reference))


def classify(prompt_index: int, test: Sequence[int], reference: ReferenceOutput, numerics_gap: float) -> Divergence | None:
    """None when the outputs are equal, else the first divergence and its kind."""
    index = first_divergence(test, reference.output_ids)
    if index is None:
        return None
    test_token = test[index] if index < len(test) else None
    reference_token = reference.output_ids[index] if index < len(reference.output_ids) else None
    top2 = reference.top2[index] if index < len(reference.top2) else []
    gap = top2[0][0] - top2[1][0] if len(top2) >= 2 else None

    def divergence(kind: DivergenceKind, reason: str) -> Divergence:
        return Divergence(prompt_index, index + 1, test_token, reference_token, gap, kind, reason)

    if test_token is None or reference_token is None:
        return divergence("real", "one output ended early")
    if gap is None:
        return divergence("real", "the reference reported no top-2 here")
    if test_token not in (top2[0][1], top2[1][1]):
        return divergence("real", "not one of the reference's two best tokens")
    if gap >= numerics_gap:
        return divergence("real", f"the reference's top-2 gap {gap:.3g} nats is not a near-tie")
    return divergence("numerics", f"near-tie: top-2 gap {gap:.3g} nats")


@dataclass
class GreedyResult:
    """Greedy equality at one concurrency."""

    concurrency: int
    prompts: int
    equal: int
    numerics_gap: float
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "concurrency": self.concurrency,
            "prompts": self.prompts,
            "equal": self.equal,
            "numerics": self.numerics,
            "real": self.real,
            "passed": self.passed,
            "numerics_gap": self.numerics_gap,
            "divergences": [asdict(d) for d in self.divergences],
        }


def compare_greedy(
    concurrency: int, test_outputs: Sequence[Sequence[int]], references: Sequence[ReferenceOutput], numerics_gap: float = DEFAULT_NUMERICS_GAP
) -> GreedyResult:
    """Compare every prompt's output with the reference's, in prompt order."""
    if len(test_outputs) != len(references):
        raise SpecsuiteError(f"greedy equality: {len(test_outputs)} outputs against {len(references)} reference outputs")
    result = GreedyResult(concurrency, len(references), 0, numerics_gap)
    for index, (test, reference) in enumerate(zip(test_outputs, references, strict=True)):
        divergence = classify(index, test, reference, numerics_gap)
        if divergence is None:
            result.equal += 1
        else:
            result.divergences.append(divergence)
    return result
