"""One verify step through a loaded sampler, with numpy in and out.

The kernel's outputs are laid out for SGLang's tree buffers: `predicts` is indexed by the global
slot ids in `retrive_index`, `accept_index[b, :n+1]` lists the slots a row committed and
`accept_token_num[b]` is n, the accepted drafts.  `emitted[b, :n+1]` unpacks that into the tokens
the row commits this step (the accepted drafts, then the residual or bonus token), padded with -1.
"""

from __future__ import annotations

import numpy as np

from specsuite.kernel_loading.loader import LoadedKernel
from specsuite.kernel_loading.outcome import ChainOutcome

__all__ = ["ChainOutcome", "run_chain"]


def run_chain(
    kernel: LoadedKernel,
    target_probs: np.ndarray,
    draft_probs: np.ndarray,
    draft_ids: np.ndarray,
    accept_coins: np.ndarray,
    final_coins: np.ndarray,
    root_ids: np.ndarray | None = None,
    block_verification: bool | None = None,
) -> ChainOutcome:
    """target_probs (B, k+1, V), draft_probs (B, k, V), draft_ids (B, k), accept_coins (B, k) and
    final_coins (B,), as float32/int64 arrays; root_ids (B,) is the token the drafts follow.
    block_verification: None follows the kernel's source (``:block``); True/False forces a path."""
    import torch

    block = kernel.spec.block if block_verification is None else block_verification
    options = {"block_verification": True} if block else {}  # 0.5.20's function has no such keyword

    batch, steps = draft_ids.shape
    slots = steps + 1
    device = kernel.torch_device
    candidates = np.empty((batch, slots), dtype=np.int64)
    candidates[:, 0] = root_ids if root_ids is not None else 0
    candidates[:, 1:] = draft_ids
    as_tensor = lambda array, dtype: torch.as_tensor(np.require(array, requirements=["C", "W"]), dtype=dtype, device=device)  # noqa: E731
    retrive_index = torch.arange(batch * slots, dtype=torch.int64, device=device).reshape(batch, slots)
    predicts = torch.full((batch * slots,), -1, dtype=torch.int32, device=device)
    accept_index = torch.full((batch, slots), -1, dtype=torch.int32, device=device)
    accept_token_num = torch.zeros(batch, dtype=torch.int32, device=device)
    kernel.function(
        predicts, accept_index, accept_token_num,
        as_tensor(candidates, torch.int64), retrive_index,
        torch.full((batch, slots), -1, dtype=torch.int64, device=device),  # retrive_next_token (chain: unused)
        torch.full((batch, slots), -1, dtype=torch.int64, device=device),  # retrive_next_sibling (unused)
        as_tensor(accept_coins, torch.float32), as_tensor(final_coins, torch.float32),
        as_tensor(target_probs, torch.float32), as_tensor(draft_probs, torch.float32),
        1.0, 1.0, True, **options,
    )
    accepted = accept_token_num.cpu().numpy().astype(np.int64)
    flat = predicts.cpu().numpy().astype(np.int64).reshape(batch, slots)
    within = np.arange(slots)[None, :] <= accepted[:, None]
    emitted = np.where(within, flat, -1)
    return ChainOutcome(accepted, emitted, emitted[np.arange(batch), accepted])
