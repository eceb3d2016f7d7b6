"""SGLang's chain sampler, `chain_speculative_sampling_triton` (installed, sglang==VERSION or a .py file, each maybe
:block), as a kernel engine.

Loaded in this process by the shared loader (specsuite.kernel_loading.loader, whose grammar names its sources) and
called with numpy arrays through its own signature, the suite's batch of rows per call; it takes the coins as input, so
the verification rule is checked row by row. Its classes are the corrupted-q ones (the recycled-draft_probs bug's -inf
mask and other malformed q) beside the well-formed ones; its scenarios give it probabilities, not logits. It is the
suite's default engine: without --kernel, the SGLang this Python has.
"""

from __future__ import annotations

import importlib.util

from specsuite.kernel_loading.invoke import run_chain
from specsuite.kernel_loading.loader import SGLANG_ENGINE, LoadedKernel, load_sglang_kernel
from specsuite.kernel_loading.outcome import ChainOutcome
from specsuite.kernels.engines.registry import KernelEngine, register
from specsuite.kernels.inputs import INPUT_CLASSES, ChainInput

PROBABILITY_SCENARIOS = ("well-formed", "p-equals-q")  # the scenarios of a sampler that is given p and q as probabilities


def call_chain_signature(kernel: LoadedKernel, data: ChainInput, block_verification: bool | None) -> ChainOutcome:
    """One call through SGLang's kernel signature (numpy in and out): the arrays of `data` and the coins."""
    return run_chain(kernel, *data.arrays(), block_verification=block_verification)


def missing_installed() -> str | None:
    if importlib.util.find_spec("sglang") is None:
        return "no --kernel given and no SGLang installed: pass --kernel sglang==VERSION, a file, or refserver"
    return None


SGLANG = register(KernelEngine(
    name=SGLANG_ENGINE,
    load=load_sglang_kernel,
    call=call_chain_signature,
    input_classes=tuple(INPUT_CLASSES),
    scenarios=PROBABILITY_SCENARIOS,
    default_source="installed",
    default_missing=missing_installed,
))
