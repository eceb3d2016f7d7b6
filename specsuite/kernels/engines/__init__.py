"""Kernel engines: every sampler family the kernel suite tests (SGLang's kernel, vLLM's sampler, the reference server's
numpy sampler), one module each, and the registry generic code asks (specsuite/kernels/engines/registry.py says what an
entry holds).

Importing this package registers the built-in engines, SGLang first (the default source's engine). Another engine
registers itself the same way from its own module (`register(KernelEngine(...))`).
"""

from specsuite.kernels.engines import refserver, sglang, vllm  # noqa: F401  registration (SGLang's module first: refserver's imports it)
from specsuite.kernels.engines.registry import (
    KernelEngine,
    all_engines,
    all_input_classes,
    default_engine,
    default_source,
    for_source,
    get,
    names,
    of,
    parse_source,
    register,
    unregister,
)

__all__ = ["KernelEngine", "all_engines", "all_input_classes", "default_engine", "default_source", "for_source", "get", "names", "of", "parse_source",
           "register", "unregister"]
