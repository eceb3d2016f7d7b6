"""Row-by-row comparison of two samplers on identical inputs and coins (the numpy reference
sampler against a real kernel), with every disagreement explained or reported as a defect.

The kernel sums in fp32 (sequentially within each 4096-wide block under the interpreter, in a
tree on a GPU), numpy in float64, so the two can split at a CDF boundary: the coin's target
u = coin * norm falls within rounding of the cumulative sum at an id between the two answers.
Such a row is a float-order tie; its margin is |cdf(id) - u| / norm in float64, and it counts as a
tie only when the margin is below `TIE_TOLERANCE`, a bound on fp32 summation error over a block.
Any other disagreement (a different accept count, or different ids far from a boundary) is a defect.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specsuite.kernels.inputs import ChainInput
from specsuite.kernels.invoke import ChainOutcome

BLOCK = 4096  # the kernel's BLOCK_V: its CDF is summed in blocks this wide
TIE_TOLERANCE = BLOCK * 2.0**-24  # relative error bound of an fp32 sum of BLOCK non-negative terms


@dataclass
class RowDisagreement:
    """One row where the two samplers committed different things."""

    input_class: str
    row: int
    kind: str  # "tie" (float order at a CDF boundary) or "defect"
    reference: dict[str, Any]
    kernel: dict[str, Any]
    margin: float | None = None  # relative distance of the coin's target from the nearest boundary

    def to_dict(self) -> dict[str, Any]:
        return {"class": self.input_class, "row": self.row, "kind": self.kind, "margin": self.margin,
                "reference": self.reference, "kernel": self.kernel}


@dataclass
class ConformanceTally:
    """Rows compared and what disagreed, over any number of inputs."""

    rows: int = 0
    by_class: dict[str, int] = field(default_factory=dict)
    disagreements: list[RowDisagreement] = field(default_factory=list)

    @property
    def defects(self) -> list[RowDisagreement]:
        return [d for d in self.disagreements if d.kind == "defect"]

    @property
    def ties(self) -> list[RowDisagreement]:
        return [d for d in self.disagreements if d.kind == "tie"]

    def summary(self) -> str:
        worst = max((t.margin or 0.0 for t in self.ties), default=0.0)
        return (f"{self.rows} rows over {len(self.by_class)} classes: {len(self.defects)} defects, "
                f"{len(self.ties)} float-order ties (largest margin {worst:.2e}, tolerance {TIE_TOLERANCE:.2e})")


def _committed(outcome: ChainOutcome, row: int) -> dict[str, Any]:
    accepted = int(outcome.accepted[row])
    return {"accepted": accepted, "emitted": [int(v) for v in outcome.emitted[row, : accepted + 1]]}


def _residual_row(data: ChainInput, row: int, position: int, fix_arm: bool) -> np.ndarray:
    """The row the final id is drawn from, in float64: p at the bonus position, else (p - q')+ with
    q' the kernel's guarded q."""
    p = data.target_probs[row, position].astype(np.float64)
    if position == data.draft_ids.shape[1]:
        return p
    q = data.draft_probs[row, position].astype(np.float64)
    q = np.where((q >= 0.0) & (q <= 1.0), q, 0.0) if fix_arm else np.where(q == q, q, 0.0)
    with np.errstate(invalid="ignore"):
        return np.maximum(p - q, 0.0)


def boundary_margin(data: ChainInput, row: int, position: int, ids: tuple[int, int], fix_arm: bool) -> float | None:
    """min over the boundaries between the two ids, cdf(i) for i in [lo, hi), of |cdf(i) - u| / norm;
    when one id is the fallback vocab-1, the total too (the kernel's CDF never passed u).  None when
    the row has no finite mass."""
    residual = _residual_row(data, row, position, fix_arm)
    norm = float(residual.sum())
    if not np.isfinite(norm) or norm <= 0:
        return None
    cdf = np.cumsum(residual)
    target = float(data.final_coins[row]) * norm
    low, high = sorted(ids)
    boundaries = list(cdf[low:high])
    if high == cdf.size - 1:
        boundaries.append(cdf[-1])
    return float(np.min(np.abs(np.array(boundaries) - target)) / norm)


def compare(data: ChainInput, reference: ChainOutcome, kernel: ChainOutcome, fix_arm: bool, tally: ConformanceTally) -> None:
    """Add one input's rows to `tally`, classifying each disagreement."""
    tally.rows += data.batch
    tally.by_class[data.input_class] = tally.by_class.get(data.input_class, 0) + data.batch
    differs = (reference.accepted != kernel.accepted) | (reference.emitted != kernel.emitted).any(axis=1)
    for row in np.flatnonzero(differs).tolist():
        kind, margin = "defect", None
        if reference.accepted[row] == kernel.accepted[row]:
            position = int(reference.accepted[row])
            ids = (int(reference.final_ids[row]), int(kernel.final_ids[row]))
            margin = boundary_margin(data, row, position, ids, fix_arm)
            if margin is not None and margin <= TIE_TOLERANCE:
                kind = "tie"
        tally.disagreements.append(RowDisagreement(data.input_class, row, kind, _committed(reference, row), _committed(kernel, row), margin))
