"""One verify step of a kernel input through any loaded sampler, as its engine calls it (specsuite/kernels/engines/:
SGLang's signature with numpy in and out, specsuite.kernel_loading.invoke.run_chain, or the whole input at once)."""

from __future__ import annotations

import numpy as np

from specsuite.kernel_loading.invoke import run_chain
from specsuite.kernel_loading.loader import LoadedKernel
from specsuite.kernel_loading.outcome import ChainOutcome
from specsuite.kernels import engines
from specsuite.kernels.inputs import ChainInput

__all__ = ["ChainOutcome", "run_all_rows", "run_chain", "run_input"]


def run_input(kernel: LoadedKernel, data: ChainInput, block_verification: bool | None = None) -> ChainOutcome:
    """One verify step of `data` through any engine, in one call of its sampler."""
    return engines.of(kernel).call(kernel, data, block_verification)


def run_all_rows(kernel: LoadedKernel, data: ChainInput, batch: int, block_verification: bool | None = None) -> ChainOutcome:
    """Every row of `data`, `batch` rows per call (one call for an engine that takes a whole input)."""
    if engines.of(kernel).takes_whole_input:
        return run_input(kernel, data, block_verification)
    parts = [run_input(kernel, data.rows(slice(start, start + batch)), block_verification) for start in range(0, data.batch, batch)]
    return ChainOutcome(np.concatenate([p.accepted for p in parts]), np.concatenate([p.emitted for p in parts]),
                        np.concatenate([p.final_ids for p in parts]))
