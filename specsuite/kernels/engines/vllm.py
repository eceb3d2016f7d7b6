"""vLLM's rejection sampler (`vllm==X` / `vllm-installed`, maybe :expand-fix) as a kernel engine.

It runs in a child process of the vLLM environment's Python (specsuite.kernels.vllm_sampler), started at load and
stopped by `LoadedKernel.close`; one call takes a whole input with its sampling parameters (logits, per-row temperature
and top-p), so it is never split into batches and `block_verification` does not apply. It draws its own coins from
seeded generators, so the verification rule is a statistical member of the distribution family. Its classes are its
sampling paths on well-formed q (greedy and random rows, with and without draft probabilities); its scenarios add the
logit-only ones (no draft probabilities, temperature and top-p).
"""

from __future__ import annotations

from specsuite.kernel_loading.loader import KernelSpec, LoadedKernel, require_torch_and_triton
from specsuite.kernel_loading.outcome import ChainOutcome
from specsuite.kernels.engines.registry import KernelEngine, register
from specsuite.kernels.engines.sglang import PROBABILITY_SCENARIOS
from specsuite.kernels.inputs import VLLM_CLASSES, ChainInput

ENGINE = "vllm"  # KernelSpec.engine of the shared grammar's vllm==X / vllm-installed sources
LOGIT_SCENARIOS = (*PROBABILITY_SCENARIOS, "no-draft-probs", "temperature-top-p")


def load(spec: KernelSpec) -> LoadedKernel:
    from specsuite.kernels.vllm_sampler import start_vllm_sampler

    require_torch_and_triton(need_triton=False)
    sampler, ready = start_vllm_sampler(spec.version, spec.corrected_expand)
    expand = "corrected expand" if spec.corrected_expand else "stock expand"
    return LoadedKernel(spec, f"vllm {ready.vllm} ({expand})", str(ready.device), "cpu", sampler,
                        version=str(ready.vllm), details=ready.line)


def call_whole_input(kernel: LoadedKernel, data: ChainInput, _block_verification: bool | None) -> ChainOutcome:
    """The child's sampler takes the whole input, sampling parameters included."""
    return kernel.function(data)


VLLM = register(KernelEngine(
    name=ENGINE,
    load=load,
    call=call_whole_input,
    input_classes=tuple(VLLM_CLASSES),
    scenarios=LOGIT_SCENARIOS,
    draws_own_coins=True,
    takes_whole_input=True,
))
