"""Server kinds: every server the harness speaks (SGLang, vLLM), one module each, and the registry generic code asks
(specsuite/server/kinds/registry.py says what an entry holds and how detection goes).

Importing this package registers the built-in kinds, SGLang first: detection asks the kinds in registration order,
and a server none recognises is taken for the first. Another kind registers itself the same way from its own
module (`register(ServerKind(...))`).
"""

from specsuite.server.kinds import sglang, vllm  # noqa: F401  registration, in this order (detection order)
from specsuite.server.kinds.registry import (
    AUTO,
    AcceptCounters,
    BenchBackend,
    ServerKind,
    all_counters,
    all_kinds,
    bench_backend,
    bench_backend_names,
    bench_backends,
    choices,
    detect,
    fallback,
    get,
    kind_of_backend,
    kind_of_client,
    make_client,
    named_or_fallback,
    names,
    register,
    unregister,
)

__all__ = ["AUTO", "AcceptCounters", "BenchBackend", "ServerKind", "all_counters", "all_kinds", "bench_backend", "bench_backend_names",
           "bench_backends", "choices", "detect", "fallback", "get", "kind_of_backend", "kind_of_client", "make_client", "named_or_fallback",
           "names", "register", "unregister"]
