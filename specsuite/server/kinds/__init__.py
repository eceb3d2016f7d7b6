"""Server kinds: every server the harness speaks, one folder each (specsuite/server/kinds/<name>/: its client,
launcher, integrity rules and checking client, bench stream reader, and its `ServerKind` entry in `kind.py`), and the
registry generic code asks (specsuite/server/kinds/registry.py says what an entry holds and how detection goes).

Importing this package registers the built-in kinds, `BUILTIN_KINDS` in order: detection asks the kinds in
registration order, and a server none recognises is taken for the first. A new kind is one folder and one line
in `BUILTIN_KINDS`; a test's own kind registers itself for the test (`register(...)`, `unregister(...)`).
"""

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
from specsuite.server.kinds.sglang.kind import SGLANG
from specsuite.server.kinds.vllm.kind import VLLM

BUILTIN_KINDS = (
    SGLANG,
    VLLM,
)
for _kind in BUILTIN_KINDS:  # in this order: detection order
    register(_kind)

__all__ = ["AUTO", "BUILTIN_KINDS", "AcceptCounters", "BenchBackend", "ServerKind", "all_counters", "all_kinds", "bench_backend", "bench_backend_names",
           "bench_backends", "choices", "detect", "fallback", "get", "kind_of_backend", "kind_of_client", "make_client", "named_or_fallback",
           "names", "register", "unregister"]
