"""The kernel-engine registry: one `KernelEngine` entry per sampler family the kernel suite tests, and the lookups
generic code uses.

An engine's own module (specsuite/kernels/engines/sglang.py, vllm.py, refserver.py) builds its entry and `register`s it:
how a source of its own is loaded, how one call of its sampler is made and how many rows a call takes, the input
classes and distribution scenarios it is held to, and whether it draws its own coins (which decides how the
verification rule is checked). Generic code (the loader, the invoke helpers, the rule check, the distribution family,
the suite and its pytest wiring) looks an entry up by a kernel's engine name (`get`, `of`, `for_source`) and asks it;
it never names an engine.

`--kernel` values are parsed by the engines that bring a grammar of their own (`KernelEngine.parse`), in registration
order, and otherwise by the shared grammar of specsuite.kernel_loading.loader (`KernelSpec.parse`), which the reference
server's `--sampler` parses too and which names the built-in engines' sources.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from specsuite.errors import SpecsuiteError
from specsuite.kernel_loading.loader import KernelSpec, LoadedKernel
from specsuite.kernel_loading.outcome import ChainOutcome

if TYPE_CHECKING:
    from specsuite.kernels.inputs import ChainInput


@dataclass(frozen=True)
class KernelEngine:
    """Everything generic kernel-suite code may ask about one engine."""

    name: str  # KernelSpec.engine, results' kernel "engine"
    load: Callable[[KernelSpec], LoadedKernel]  # a parsed source of this engine, ready to call (one SpecsuiteError line on failure)
    call: Callable[[LoadedKernel, ChainInput, bool | None], ChainOutcome]  # one call on some rows (block_verification: None follows the source)
    input_classes: tuple[str, ...]  # the invariant classes it is held to (specsuite/kernels/inputs.py), in parametrize order
    scenarios: tuple[str, ...]  # its distribution scenarios (specsuite/kernels/distribution.py)
    draws_own_coins: bool = False  # set: the rule is a statistical member of the distribution family, not a row-by-row check
    takes_whole_input: bool = False  # set: one call takes every row of an input; else the suite's batch of rows per call
    parse: Callable[[str], KernelSpec | None] | None = None  # its own --kernel grammar (None: the shared one names it)
    default_source: str | None = None  # the source the suite uses without --kernel (the first engine that has one)
    default_missing: Callable[[], str | None] | None = None  # why the default source cannot load here (a skip reason), or None


_ENGINES: dict[str, KernelEngine] = {}


def register(engine: KernelEngine) -> KernelEngine:
    """Add an engine; its name must be new."""
    if engine.name in _ENGINES:
        raise SpecsuiteError(f"kernel engine {engine.name!r} is taken")
    _ENGINES[engine.name] = engine
    return engine


def unregister(name: str) -> None:
    """Remove a registered engine (a test's own engine, when the test ends)."""
    del _ENGINES[name]


def all_engines() -> tuple[KernelEngine, ...]:
    """Every engine, in registration order."""
    return tuple(_ENGINES.values())


def names() -> tuple[str, ...]:
    return tuple(_ENGINES)


def get(name: str) -> KernelEngine:
    if name not in _ENGINES:
        raise SpecsuiteError(f"unknown kernel engine {name!r}: one of {', '.join(_ENGINES)}")
    return _ENGINES[name]


def of(kernel: LoadedKernel) -> KernelEngine:
    """The engine of a loaded kernel."""
    return get(kernel.engine)


def parse_source(text: str) -> KernelSpec:
    """A `--kernel` value: an engine's own grammar first, else the shared grammar (one SpecsuiteError line)."""
    for engine in all_engines():
        spec = engine.parse(text) if engine.parse is not None else None
        if spec is not None:
            return spec
    return KernelSpec.parse(text)


def for_source(text: str) -> KernelEngine:
    """The engine a `--kernel` value names."""
    return get(parse_source(text).engine)


def default_engine() -> KernelEngine:
    """The engine of the source used without --kernel: the first registered that has a default source."""
    found = next((engine for engine in all_engines() if engine.default_source is not None), None)
    if found is None:
        raise SpecsuiteError("no kernel engine has a default source: pass --kernel")
    return found


def default_source() -> tuple[str | None, str | None]:
    """(the source to use without --kernel, None) or (None, why it cannot load here)."""
    engine = default_engine()
    missing = engine.default_missing() if engine.default_missing is not None else None
    return (None, missing) if missing else (engine.default_source, None)


def all_input_classes() -> tuple[str, ...]:
    """Every engine's input classes, engine by engine without repeats: the order results list the classes run."""
    return tuple(dict.fromkeys(name for engine in all_engines() for name in engine.input_classes))
