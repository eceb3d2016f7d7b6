"""Near-ties in the integrity suite's T=0 comparisons.

The suite expects a greedy answer to equal another: a stopped or budgeted answer is a prefix of
the prompt's reference answer, a stream adds up to the non-streamed answer, a greedy row among
sampled neighbours answers as it does alone. On a GPU each of those is a separate forward (another
batch, another verify block), and a top-2 within the served dtype's resolution can flip; from
there on the outputs differ though both are correct. The lossless suite's rule decides
(`specsuite.families.lossless.greedy.classify`, tolerance from the served dtype): a first
difference at a near-tie of the answer that carries the top logprobs is numerics, recorded and not
failed; any other difference is left to the caller's checks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from specsuite.families.integrity.native_answer import ids_if_any, output_top_logprobs_of
from specsuite.families.lossless.greedy import Divergence, NearTie, ReferenceOutput, classify, top_entries


def reference_output(answer: dict[str, Any]) -> ReferenceOutput:
    """A native /generate answer's ids and per-position top logprobs (asked with top_logprobs_num)."""
    return ReferenceOutput(ids_if_any(answer), [top_entries(entry) for entry in output_top_logprobs_of(answer)])


def numerics_flip(reference: dict[str, Any], ids: Sequence[int], rule: NearTie) -> Divergence | None:
    """The first difference between `ids` and the reference answer's ids within their common length,
    when it is a near-tie of the reference's top logprobs; None when they agree there or the
    difference is no near-tie (a length difference alone is never one: stops and budgets cut)."""
    expected = reference_output(reference)
    cut = next((i for i, (a, b) in enumerate(zip(ids, expected.output_ids, strict=False)) if a != b), None)
    if cut is None:
        return None
    divergence = classify(0, list(ids[:cut + 1]), ReferenceOutput(expected.output_ids[:cut + 1], expected.top), rule)
    return divergence if divergence is not None and divergence.kind == "numerics" else None


def describe(flip: Divergence, reference_label: str) -> str:
    """One line for results and warnings."""
    return (f"id {flip.test_token} where {reference_label} has {flip.reference_token} at position {flip.position}: "
            f"{flip.reason}")


def chosen_logprob_flip(ids_a: Sequence[int], logprobs_a: Sequence[float | None] | None, ids_b: Sequence[int],
                        logprobs_b: Sequence[float | None] | None, rule: NearTie) -> str | None:
    """For answers that carry only their chosen ids' logprobs (/v1/completions with logprobs 0): where
    two greedy answers first part, each chose its own run's top; at a near-tie both tops score about
    the same, so the two logprobs within the tolerance is numerics (a line saying so); None otherwise.
    A wrong token (not its run's top) scores below the top by more than the tolerance."""
    cut = next((i for i, (a, b) in enumerate(zip(ids_a, ids_b, strict=False)) if a != b), None)
    if cut is None or not logprobs_a or not logprobs_b or cut >= min(len(logprobs_a), len(logprobs_b)):
        return None
    first, second = logprobs_a[cut], logprobs_b[cut]
    if first is None or second is None or abs(first - second) > rule.tolerance:
        return None
    return (f"ids {ids_a[cut]} and {ids_b[cut]} at position {cut + 1}, logprobs {first:.4g} and {second:.4g}: "
            f"within the {rule.describe()}")
