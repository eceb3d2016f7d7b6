"""What one verify step committed, per row: the suite's view of any sampler's output."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ChainOutcome:
    """What one verify step committed, per row."""

    accepted: np.ndarray  # (B,) drafts accepted
    emitted: np.ndarray  # (B, k+1) committed ids, -1 past accepted+1
    final_ids: np.ndarray  # (B,) the residual/bonus id, emitted[b, accepted[b]]
