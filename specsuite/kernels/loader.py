"""The kernel suite's `--kernel` loader: every engine behind one call.

SGLang's kernels (installed, sglang==VERSION, a file, each maybe :block) load through the shared
loader, specsuite.kernel_loading.loader, which the reference server's ``--sampler`` uses too; here the
harness adds its other engines: ``refserver[:nofix]`` (the reference server's numpy sampler behind
SGLang's signature, reached through specsuite.server.refserver_contract) and ``vllm==X`` /
``vllm-installed`` (vLLM's sampler in the vLLM environment's Python).  The source grammar, the
`LoadedKernel` type and the constants are specsuite.kernel_loading.loader's, re-exported here for the suite.
"""

from __future__ import annotations

from specsuite.kernel_loading.loader import (
    BLOCK_SUFFIX,
    INTERPRETER_DEVICE,
    KERNEL_FUNCTION,
    KERNEL_MEMBER,
    OTHER_SOURCES,
    REFSERVER_ARMS,
    VLLM_EXPAND_FIX,
    KernelSpec,
    LoadedKernel,
    load_sglang_kernel,
    require_torch_and_triton,
    select_device,
)

__all__ = ["BLOCK_SUFFIX", "INTERPRETER_DEVICE", "KERNEL_FUNCTION", "KERNEL_MEMBER", "OTHER_SOURCES", "REFSERVER_ARMS",
           "VLLM_EXPAND_FIX", "KernelSpec", "LoadedKernel", "load_kernel", "select_device"]


def load_kernel(text: str) -> LoadedKernel:
    """Resolve and load the sampler named by `text`; every failure is one SpecsuiteError line."""
    spec = KernelSpec.parse(text)
    if spec.engine == "sglang":
        return load_sglang_kernel(spec)
    require_torch_and_triton(need_triton=False)
    if spec.kind == "refserver":
        from specsuite.kernels.refserver_sampler import refserver_chain_sampler

        return LoadedKernel(spec, f"reference numpy sampler ({spec.refserver_arm} arm)", "cpu (numpy)", "cpu",
                            refserver_chain_sampler(spec.refserver_arm == "fix"))
    from specsuite.kernels.vllm_sampler import start_vllm_sampler

    sampler, ready = start_vllm_sampler(spec.version, spec.corrected_expand)
    expand = "corrected expand" if spec.corrected_expand else "stock expand"
    return LoadedKernel(spec, f"vllm {ready.vllm} ({expand})", str(ready.device), "cpu", sampler,
                        version=str(ready.vllm), details=ready.line)
