"""Conformance of the reference server's numpy sampler to SGLang's real kernels: on identical inputs
and coins, the nofix arm must commit what 0.5.20 commits and the fix arm what 0.5.23 commits, row
for row (accepted count and every emitted id), over every input class, the degenerate residual
included.  The only allowed difference is a float-order tie at a CDF boundary (fp32 blocks in the
kernel, float64 in numpy), which specsuite.kernels.conformance classifies and bounds.

Most rows use small vocabularies (the interpreter's cost is per row and 4096-wide block), one of
them padded like GLM's (tokenizer shorter than the kernel's vocab); some rows run at the suite's
default 8128."""

from __future__ import annotations

import pytest

from specsuite.kernels.conformance import ConformanceTally, compare
from specsuite.kernels.distribution import distribution_input
from specsuite.kernels.inputs import CONFORMANCE_ONLY_CLASSES, INPUT_CLASSES, KernelShape, build_input
from specsuite.kernels.invoke import run_chain
from specsuite.kernels.loader import load_kernel

CLASSES = list(INPUT_CLASSES) + list(CONFORMANCE_ONLY_CLASSES)
PAIRS = {"nofix-vs-0.5.20": ("refserver:nofix", "sglang==0.5.20", False), "fix-vs-0.5.23": ("refserver", "sglang==0.5.23", True)}
# (shape, seeds): thousands of rows at small vocabularies, a few hundred at the default shape.
SWEEP = [
    (KernelShape(batch=64, kernel_vocab=512, tokenizer_vocab=512), (0,)),
    (KernelShape(batch=64, kernel_vocab=1024, tokenizer_vocab=1000), (2,)),
    (KernelShape(batch=16, kernel_vocab=8128, tokenizer_vocab=8128), (3,)),
]
MAX_TIE_SHARE = 0.005  # float-order ties allowed, as a share of rows (none have been seen so far)


@pytest.fixture(scope="module")
def kernels():
    return {source: load_kernel(source) for pair in PAIRS.values() for source in pair[:2]}


def _tally(kernels, reference: str, real: str, fix_arm: bool) -> ConformanceTally:
    tally = ConformanceTally()
    for shape, seeds in SWEEP:
        inputs = [build_input(name, seed, shape) for seed in seeds for name in CLASSES]
        inputs.append(distribution_input("well-formed", 7 + seeds[0], shape, rows=shape.batch * 4))  # small supports: CDF boundaries close together
        for data in inputs:
            compare(data, run_chain(kernels[reference], *data.arrays()), run_chain(kernels[real], *data.arrays()), fix_arm, tally)
    return tally


@pytest.mark.slow
@pytest.mark.parametrize("pair", PAIRS)
def test_numpy_sampler_commits_what_the_kernel_commits(kernels, pair: str, record_property) -> None:
    reference, real, fix_arm = PAIRS[pair]
    tally = _tally(kernels, reference, real, fix_arm)
    record_property("conformance", tally.summary())
    print(f"{pair}: {tally.summary()}")
    assert set(tally.by_class) >= set(CLASSES)
    assert tally.rows >= 2000
    assert not tally.defects, f"{pair}: {tally.summary()}; first: {tally.defects[0].to_dict()}"
    assert len(tally.ties) <= MAX_TIE_SHARE * tally.rows, tally.summary()


def test_the_comparison_catches_a_different_sampler(kernels) -> None:
    """The fix arm against the bug's kernel must disagree, as defects, on the recycled pool block's -inf runs."""
    shape = KernelShape(batch=32, kernel_vocab=512, tokenizer_vocab=512)
    tally = ConformanceTally()
    data = build_input("neg-inf-run-covers-draft", 0, shape)
    compare(data, run_chain(kernels["refserver"], *data.arrays()), run_chain(kernels["sglang==0.5.20"], *data.arrays()), True, tally)
    assert len(tally.defects) == shape.batch


def test_degenerate_residual_commits_the_fallback_id_in_both_arms(kernels) -> None:
    """0.5.23 commits vocab_size-1 on a degenerate residual (p == q, q(X) = 0); so does the numpy fix
    arm without the reference server's output guard; with it, the id is redrawn from p."""
    import numpy as np

    from specsuite.refserver.sampling import SamplerGuards, chain_rejection_sample

    shape = KernelShape(batch=8, kernel_vocab=512, tokenizer_vocab=500)
    data = build_input("degenerate-residual", 0, shape)
    kernel = run_chain(kernels["sglang==0.5.23"], *data.arrays())
    assert (kernel.final_ids == shape.kernel_vocab - 1).all()
    bare = chain_rejection_sample(*data.arrays(), SamplerGuards(True, shape.tokenizer_vocab, output_guard=False))
    assert (bare.final_ids == shape.kernel_vocab - 1).all() and bare.fallback.all()
    guarded = chain_rejection_sample(*data.arrays(), SamplerGuards(True, shape.tokenizer_vocab))
    assert guarded.guard_replaced.all() and not guarded.fallback.any()
    rows = np.arange(shape.batch)
    assert (data.target_probs[rows, guarded.accepted_drafts, guarded.final_ids] > 0).all()


def _one_row_outcomes(final_a: int, final_b: int):
    import numpy as np

    from specsuite.kernels.invoke import ChainOutcome

    def outcome(final: int) -> ChainOutcome:
        emitted = np.full((1, 6), -1)
        emitted[0, 0] = final
        return ChainOutcome(np.array([0]), emitted, np.array([final]))

    return outcome(final_a), outcome(final_b)


@pytest.mark.parametrize(("coin", "kind"), [(0.5 + 1e-6, "tie"), (0.9, "defect")])
def test_a_split_at_a_cdf_boundary_is_a_tie_and_elsewhere_a_defect(coin: float, kind: str) -> None:
    """Residual mass 0.5 on id 3 and 0.5 on id 4: a coin a hair past 0.5 sits on the boundary between
    them (a float-order tie if the samplers split there); a coin of 0.9 is far from any boundary."""
    import numpy as np

    from specsuite.kernels.inputs import ChainInput

    vocab, steps = 256, 5
    target = np.zeros((1, steps + 1, vocab), dtype=np.float32)
    target[0, :, 3] = target[0, :, 4] = 0.5
    draft = np.zeros((1, steps, vocab), dtype=np.float32)
    draft[0, :, 9] = 1.0  # the draft's id has no target mass: rejected at step 0, residual = p
    data = ChainInput("synthetic", target, draft, np.full((1, steps), 9), np.zeros((1, steps), np.float32),
                      np.array([coin], np.float32), vocab, 0)
    tally = ConformanceTally()
    compare(data, *_one_row_outcomes(3, 4), True, tally)
    assert [d.kind for d in tally.disagreements] == [kind]
    assert tally.disagreements[0].margin == pytest.approx(abs(float(np.float32(coin)) - 0.5) / 1.0, rel=1e-3)
