"""The real kernels on a GPU, at GLM-5.2's shapes: 0.5.23 keeps every invariant and commits what the
numpy fix arm commits; 0.5.20 emits the padded fallback id.  Skips, with its reason, where torch
sees no GPU (CI has none); tools/calibration/kernel_gpu_session.sh runs the whole suite there."""

from __future__ import annotations

import pytest

from specsuite.errors import SpecsuiteError
from specsuite.kernels.conformance import ConformanceTally, compare
from specsuite.kernels.inputs import KernelShape, build_input
from specsuite.kernels.invariants import check_no_invalid_q_accepted, check_no_unsupported_fallback, check_valid_ids
from specsuite.kernels.invoke import run_chain
from specsuite.kernels.loader import load_kernel

torch = pytest.importorskip("torch", reason="the GPU kernel tests need torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU visible to torch: the GPU kernel tests run on a CUDA or ROCm node")

GLM_SHAPE = KernelShape(batch=16, steps=5, kernel_vocab=154880, tokenizer_vocab=154856)
CLASSES = ("well-formed", "neg-inf-run-spares-draft", "neg-inf-run-covers-draft", "draft-q-zero", "q-row-posinf")


def _load(source: str):
    try:
        return load_kernel(source)
    except SpecsuiteError as exc:
        pytest.skip(f"{source} unavailable: {exc}")


def test_fixed_kernel_on_gpu_keeps_invariants_and_matches_numpy() -> None:
    kernel, numpy_fix = _load("sglang==0.5.23"), _load("refserver")
    assert kernel.torch_device == "cuda"
    tally = ConformanceTally()
    for input_class in CLASSES:
        data = build_input(input_class, 0, GLM_SHAPE)
        args = (data.target_probs, data.draft_probs, data.draft_ids, data.accept_coins, data.final_coins)
        outcome = run_chain(kernel, *args)
        for check in (check_valid_ids, check_no_unsupported_fallback, check_no_invalid_q_accepted):
            result = check(data, outcome)
            assert result.passed, f"{input_class}: {result.to_dict()}"
        compare(data, run_chain(numpy_fix, *args), outcome, True, tally)
    assert not tally.defects, tally.summary()


def test_bug_kernel_on_gpu_emits_the_padded_fallback() -> None:
    kernel = _load("sglang==0.5.20")
    data = build_input("q-row-posinf", 0, GLM_SHAPE)
    outcome = run_chain(kernel, data.target_probs, data.draft_probs, data.draft_ids, data.accept_coins, data.final_coins)
    assert (outcome.final_ids == GLM_SHAPE.kernel_vocab - 1).any()
    assert not check_valid_ids(data, outcome).passed
