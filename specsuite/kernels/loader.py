"""The kernel suite's `--kernel` loader: every engine behind one call.

SGLang's kernels (installed, sglang==VERSION, a file, each maybe :block) load through the shared
loader, specsuite.kernel_loading.loader, which the reference server's ``--sampler`` uses too; here the
harness adds its other engines: ``refserver[:nofix]`` (the reference server's numpy sampler behind
SGLang's signature, reached through specsuite.server.refserver_contract) and ``vllm==X`` /
``vllm-installed`` (vLLM's sampler in the vLLM environment's Python).  Each engine loads its own sources
(specsuite/kernels/engines/, one module per engine); this module only parses and hands over.  The source
grammar, the `LoadedKernel` type and the constants are specsuite.kernel_loading.loader's, re-exported here
for the suite.
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
    select_device,
)
from specsuite.kernels import engines

__all__ = ["BLOCK_SUFFIX", "INTERPRETER_DEVICE", "KERNEL_FUNCTION", "KERNEL_MEMBER", "OTHER_SOURCES", "REFSERVER_ARMS",
           "VLLM_EXPAND_FIX", "KernelSpec", "LoadedKernel", "load_kernel", "select_device"]


def load_kernel(text: str) -> LoadedKernel:
    """Resolve and load the sampler named by `text`; every failure is one SpecsuiteError line."""
    spec = engines.parse_source(text)
    return engines.get(spec.engine).load(spec)
