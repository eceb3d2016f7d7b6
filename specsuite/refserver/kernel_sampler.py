"""`--sampler`: which chain rejection sampler decides the reference server's sampled verify rows.

``numpy`` (the default) is the server's own sampler (`sampling.chain_rejection_sample`), with the
guards of the arm (fix, guards-only).  Any other value names SGLang's `chain_speculative_sampling_triton` through
`specsuite.kernel_loading.loader` (``sglang==VERSION``, ``installed``, or a path to a ``reject_sampling.py``),
and that kernel then decides what is accepted and emitted.  Everything upstream is unchanged: the
graph-pool emulation still hands the nofix arm its corrupt `draft_probs`, so a release's kernel
meets the -inf-masked q that the bug produces and its own code decides what they turn into.

The kernel reports no fallback flag, so one is defined here (`_fallback_emissions`): an emitted
``vocab_size - 1`` is the fallback when the search cannot have stopped on it, because its own weight
in the searched distribution is zero or the row's total weight is not finite.  The fix's output
guard is the numpy sampler's, not part of SGLang, so with a kernel no id is ever replaced
(`guard_replaced` is all false).
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from specsuite.errors import SpecsuiteError
from specsuite.kernel_loading.invoke import run_chain
from specsuite.kernel_loading.loader import OTHER_SOURCES, KernelSpec, LoadedKernel, load_sglang_kernel
from specsuite.refserver.sampling import ChainResult

NUMPY_SAMPLER = "numpy"


def parse_sampler_option(text: str) -> str:
    """argparse `type=` for --sampler: numpy, sglang==VERSION, installed or a .py path."""
    value = text.strip()
    if value == NUMPY_SAMPLER:
        return value
    try:
        spec = KernelSpec.parse(value)
    except SpecsuiteError as exc:
        # The loader's message names its own option and its refserver sources; say it in this server's terms.
        message = str(exc).replace("--kernel", "--sampler", 1).replace(OTHER_SOURCES, "")
        message = message.replace("expected installed, sglang==VERSION, a path to a .py file, or refserver[:nofix]",
                                  f"expected {NUMPY_SAMPLER}, installed, sglang==VERSION or a path to a .py file")
        raise argparse.ArgumentTypeError(message) from None
    if spec.kind == "refserver":
        raise argparse.ArgumentTypeError(f"{value!r} is this server's own sampler: use --sampler numpy")
    if spec.engine == "vllm" or spec.block:  # the kernel suite's other engines; this server calls SGLang's token path
        raise argparse.ArgumentTypeError(f"{value!r}: this server runs SGLang's token-verification kernel (numpy, installed, sglang==VERSION or a .py file)")
    return value


def numpy_sampler_identity(guards_enabled: bool) -> dict[str, Any]:
    """What /server_info says when the numpy sampler decides."""
    return {"sampler": NUMPY_SAMPLER, "label": f"reference numpy sampler (guards {'on' if guards_enabled else 'off'})",
            "kind": "numpy", "version": None, "sha256": None, "device": "cpu (numpy)", "module_path": None}


class KernelChainSampler:
    """SGLang's chain sampler behind the numpy sampler's call shape, returning a `ChainResult`."""

    def __init__(self, kernel: LoadedKernel) -> None:
        self.kernel = kernel

    @classmethod
    def load(cls, text: str) -> KernelChainSampler:
        """Resolve and load the kernel in this process (the engine's: a GPU context or Triton's
        interpreter setting must not cross a fork); failures are one SpecsuiteError line."""
        return cls(load_sglang_kernel(text))

    def identity(self) -> dict[str, Any]:
        described = self.kernel.to_dict()
        return {"sampler": described.pop("kernel"), **described}

    def sample(
        self,
        target_probs: np.ndarray,
        draft_probs: np.ndarray,
        draft_ids: np.ndarray,
        accept_coins: np.ndarray,
        final_coins: np.ndarray,
    ) -> ChainResult:
        """One verify step for B rows: target_probs (B, k+1, V), draft_probs (B, k, V) as the
        sampler reads them (possibly corrupt), draft_ids (B, k), accept_coins (B, k), final_coins (B,)."""
        target32 = np.asarray(target_probs, dtype=np.float32)
        outcome = run_chain(self.kernel, target32, np.asarray(draft_probs, dtype=np.float32), np.asarray(draft_ids, dtype=np.int64),
                            np.asarray(accept_coins, dtype=np.float32), np.asarray(final_coins, dtype=np.float32))
        accepted = outcome.accepted.astype(np.int64)
        final_ids = outcome.final_ids.astype(np.int64)
        fallback = _fallback_emissions(target32, np.asarray(draft_probs, dtype=np.float32), accepted, final_ids)
        return ChainResult(accepted, final_ids, fallback, np.zeros(len(final_ids), dtype=bool))


def _fallback_emissions(target_probs: np.ndarray, draft_probs: np.ndarray, accepted: np.ndarray, final_ids: np.ndarray) -> np.ndarray:
    """(B,) bool: the row's final id is the kernel's fallback, not a draw.

    The kernel's search stops at the first id where the running sum of the searched weights
    passes coin * total, and commits vocab_size - 1 when none does.  An emitted vocab_size - 1 is
    therefore the fallback when that id's own weight is zero (a sum that passes there would have
    passed one id earlier) or when the row's total is not finite (coin * inf is never passed: the
    -inf q of the recycled pool block).  The weights are p at the bonus position (every draft accepted) and (p - q)+
    at a rejection, with a NaN q read as 0 as every kernel does.  A kernel that range-guards q
    (0.5.23) searches a finite total even in a corrupt row; a genuine draw of vocab_size - 1 there
    (probability p(vocab_size - 1), next to nothing) would be counted as a fallback.
    """
    batch, slots, vocab = target_probs.shape
    steps = slots - 1
    last = vocab - 1
    rows = np.flatnonzero(final_ids == last)
    fallback = np.zeros(batch, dtype=bool)
    if rows.size == 0:
        return fallback
    position = np.clip(accepted[rows], 0, steps)
    p_row = target_probs[rows, position].astype(np.float64)
    weights = p_row
    rejected = position < steps
    if rejected.any():
        q_row = draft_probs[rows[rejected], position[rejected]].astype(np.float64)
        q_row = np.where(np.isnan(q_row), 0.0, q_row)
        with np.errstate(invalid="ignore", over="ignore"):
            weights = p_row.copy()
            weights[rejected] = np.maximum(p_row[rejected] - q_row, 0.0)
    with np.errstate(invalid="ignore", over="ignore"):
        total = weights.sum(axis=1)
    fallback[rows] = (weights[:, last] <= 0.0) | ~np.isfinite(total)
    return fallback
