"""The reference server's numpy sampler (`refserver` / `refserver:nofix`) as a kernel engine.

It sits behind SGLang's kernel signature (specsuite.kernels.refserver_sampler), so it is called, batched and checked as
SGLang's kernel is: the coins as input, the corrupted-q classes, the probability scenarios. Loading needs torch (the
signature's tensors) but not Triton. The numpy verifiers of specsuite.kernels.model_verifiers run as this engine too.
"""

from __future__ import annotations

from specsuite.kernel_loading.loader import KernelSpec, LoadedKernel, require_torch_and_triton
from specsuite.kernels.engines.registry import KernelEngine, register
from specsuite.kernels.engines.sglang import PROBABILITY_SCENARIOS, call_chain_signature
from specsuite.kernels.inputs import INPUT_CLASSES
from specsuite.server.refserver_contract import FIX_ARM

ENGINE = "refserver"  # KernelSpec.engine of the shared grammar's refserver[:nofix] sources


def load(spec: KernelSpec) -> LoadedKernel:
    from specsuite.kernels.refserver_sampler import refserver_chain_sampler

    require_torch_and_triton(need_triton=False)
    return LoadedKernel(spec, f"reference numpy sampler ({spec.refserver_arm} arm)", "cpu (numpy)", "cpu",
                        refserver_chain_sampler(spec.refserver_arm == FIX_ARM))


REFSERVER = register(KernelEngine(
    name=ENGINE,
    load=load,
    call=call_chain_signature,
    input_classes=tuple(INPUT_CLASSES),
    scenarios=PROBABILITY_SCENARIOS,
))
