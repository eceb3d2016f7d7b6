"""A fourth kernel engine, "stubby", whole in this one module: what a new engine needs, with nothing of the kernel suite
edited.

tests/kernels/test_kernel_engine_registry.py registers `STUBBY` for one test at a time (`engines.register`,
`engines.unregister`), and the same module loaded as a pytest plugin (`-p tests.helpers.stub_kernel_engine`) registers it
for a whole `pytest suites/ -m kernel` session; the built-in engines register themselves on import the same way.

Stubby is a numpy token verifier (specsuite.kernels.model_verifiers.token_verify, written from Leviathan et al.) that
takes a whole input in one call, numpy in and out, and the coins as input: a combination no built-in engine has
(vLLM's takes a whole input but draws its own coins; SGLang's takes the coins in batches). Its own grammar:
``stubby`` (correct) and ``stubby:accept-bias`` (accepting when coin * q < 1.25 p). It is held to the well-formed classes
and the one well-formed scenario.
"""

from __future__ import annotations

import numpy as np
import pytest

from specsuite.errors import SpecsuiteError
from specsuite.kernel_loading.outcome import ChainOutcome
from specsuite.kernels.engines.registry import KernelEngine, register, unregister
from specsuite.kernels.inputs import WELL_FORMED_CLASSES, ChainInput
from specsuite.kernels.loader import KernelSpec, LoadedKernel
from specsuite.kernels.model_verifiers import token_verify

ENGINE = "stubby"
DEFECTS = ("accept-bias",)


def parse(text: str) -> KernelSpec | None:
    """stubby[:DEFECT]; None for any other source (the next grammar's)."""
    base, _, defect = text.strip().partition(":")
    if base != ENGINE:
        return None
    if defect and defect not in DEFECTS:
        raise SpecsuiteError(f"--kernel {text!r}: stubby's defects are {', '.join(DEFECTS)}")
    return KernelSpec(text.strip(), ENGINE)


def load(spec: KernelSpec) -> LoadedKernel:
    defect = spec.text.partition(":")[2] or None

    def sample(data: ChainInput) -> ChainOutcome:
        accepted, final_ids = token_verify(data.target_probs.astype(np.float64), data.draft_probs.astype(np.float64),
                                           data.draft_ids, data.accept_coins.astype(np.float64),
                                           data.final_coins.astype(np.float64), defect)
        steps = data.draft_ids.shape[1]
        emitted = np.full((data.batch, steps + 1), -1, dtype=np.int64)
        for row, count in enumerate(accepted.tolist()):
            emitted[row, :count] = data.draft_ids[row, :count]
            emitted[row, count] = final_ids[row]
        return ChainOutcome(accepted, emitted, final_ids.astype(np.int64))

    return LoadedKernel(spec, f"stubby numpy verifier{f' ({defect})' if defect else ''}", "cpu (numpy)", "cpu", sample)


STUBBY = KernelEngine(
    name=ENGINE,
    load=load,
    call=lambda kernel, data, _block: kernel.function(data),
    input_classes=WELL_FORMED_CLASSES,
    scenarios=("well-formed",),
    takes_whole_input=True,
    parse=parse,
)


def pytest_configure(config: pytest.Config) -> None:
    """As a pytest plugin: Stubby registered for the session."""
    register(STUBBY)


def pytest_unconfigure(config: pytest.Config) -> None:
    unregister(ENGINE)
