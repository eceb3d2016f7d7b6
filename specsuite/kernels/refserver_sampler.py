"""The reference server's numpy sampler behind SGLang's kernel signature, so the kernel suite and
the conformance tests can hold it to the same inputs and coins as the real kernels."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from specsuite.server import refserver_contract


def refserver_chain_sampler(fix_arm: bool) -> Callable[..., None]:
    """A callable with `chain_speculative_sampling_triton`'s positional signature (chain
    verification, one retrive_index slot per position) that writes the same output tensors."""
    chain_rejection_sample, SamplerGuards = refserver_contract.numpy_chain_sampler()

    def sample(predicts: Any, accept_index: Any, accept_token_num: Any, candidates: Any, retrive_index: Any,
               _next_token: Any, _next_sibling: Any, uniform_samples: Any, uniform_final: Any,
               target_probs: Any, draft_probs: Any, *_thresholds_and_flags: Any, **_options: Any) -> None:
        import torch

        steps = draft_probs.shape[1]
        vocab = target_probs.shape[-1]
        result = chain_rejection_sample(
            target_probs.cpu().numpy(), draft_probs.cpu().numpy(), candidates[:, 1:].cpu().numpy(),
            uniform_samples[:, :steps].cpu().numpy(), uniform_final.cpu().numpy(),
            SamplerGuards(enabled=fix_arm, tokenizer_length=vocab, output_guard=False),  # the kernels have no output guard
        )
        slots = retrive_index.cpu().numpy()
        drafts = candidates.cpu().numpy()
        out = predicts.cpu().numpy().copy()
        index = accept_index.cpu().numpy().copy()
        for row, accepted in enumerate(result.accepted_drafts.tolist()):
            committed = list(drafts[row, 1 : accepted + 1]) + [int(result.final_ids[row])]
            out[slots[row, : accepted + 1]] = committed
            index[row, : accepted + 1] = slots[row, : accepted + 1]
        predicts.copy_(torch.as_tensor(out))
        accept_index.copy_(torch.as_tensor(index))
        accept_token_num.copy_(torch.as_tensor(result.accepted_drafts.astype(np.int32)))

    return sample
