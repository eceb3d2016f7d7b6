"""One verify step of a kernel input through any loaded sampler (specsuite.kernel_loading.invoke.run_chain
calls SGLang's signature with numpy in and out; vLLM's sampler takes the whole input)."""

from __future__ import annotations

from specsuite.kernel_loading.invoke import run_chain
from specsuite.kernel_loading.loader import LoadedKernel
from specsuite.kernel_loading.outcome import ChainOutcome
from specsuite.kernels.inputs import ChainInput

__all__ = ["ChainOutcome", "run_chain", "run_input"]


def run_input(kernel: LoadedKernel, data: ChainInput, block_verification: bool | None = None) -> ChainOutcome:
    """One verify step of `data` through any engine: SGLang's kernel (or the numpy sampler behind its
    signature) takes the arrays, vLLM's sampler the whole input with its sampling parameters."""
    if kernel.engine == "vllm":
        return kernel.function(data)
    return run_chain(kernel, *data.arrays(), block_verification=block_verification)
