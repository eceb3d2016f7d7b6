"""Each kernel-suite check against a subject broken on purpose, so that every check is seen to fail:
an accept rule biased upwards (a patched copy of 0.5.23 written to a temporary folder, nothing of
SGLang kept in the repo) for the distribution family, a sampler that ignores its coins for the
determinism check, and 0.5.20's fallback on a padded vocabulary for the id-range check.  Also the
report's kernel section."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from specsuite.kernel_loading.sglang_wheel import extract_member
from specsuite.kernels.inputs import INPUT_CLASSES, KernelShape, build_input
from specsuite.kernels.invariants import check_no_unsupported_fallback, check_same_output, check_valid_ids, rerun_rows
from specsuite.kernels.invoke import run_chain
from specsuite.kernels.loader import KERNEL_MEMBER, LoadedKernel, load_kernel
from specsuite.kernels.refserver_sampler import refserver_chain_sampler
from specsuite.kernels.suite import KernelSuiteRun
from specsuite.reports.markdown import render_markdown
from specsuite.reports.overview import build_report
from specsuite.results.types import Document

SMALL = KernelShape(batch=16, kernel_vocab=512, tokenizer_vocab=500)  # padded like GLM: ids 500..511 are padded rows
ACCEPT_TEST = "if q_is_prob & (coin * q < p):"


def _biased_kernel(tmp_path: Path) -> LoadedKernel:
    source = extract_member("0.5.23", KERNEL_MEMBER).path.read_text()
    assert source.count(ACCEPT_TEST) == 1  # the line this test breaks is still there
    patched = tmp_path / "reject_sampling_biased.py"
    patched.write_text(source.replace(ACCEPT_TEST, "if q_is_prob & (coin * q < 1.5 * p):"))
    return load_kernel(str(patched))


def test_distribution_family_fires_on_a_biased_accept_rule(tmp_path: Path) -> None:
    run = KernelSuiteRun(_biased_kernel(tmp_path), KernelShape(kernel_vocab=512, tokenizer_vocab=512), seed=0, alpha=0.001,
                         distribution_rows=512)
    fired = {t.name for t in run.distribution_family() if t.rejected}
    assert any(name.startswith("well-formed/acceptance") for name in fired), fired
    # The sequence tests' own power against accept-rule biases is measured on numpy verifiers
    # (tests/kernels/test_kernel_sequence_tests.py, tools/calibration/kernel_sequence_power.py): at 512 rows a
    # 1.5x bias on this chain moves the committed tokens by less than they detect reliably.
    assert not any(name.startswith("p-equals-q/acceptance") for name in fired)  # min(1, 1.5) is still 1 there


def test_distribution_family_is_quiet_on_the_fixed_release() -> None:
    run = KernelSuiteRun(load_kernel("sglang==0.5.23"), KernelShape(kernel_vocab=512, tokenizer_vocab=512), seed=0, alpha=0.001,
                         distribution_rows=512)
    tests = run.distribution_family()
    assert not [t.name for t in tests if t.rejected]
    assert all(t.detectable_at_90 is not None and t.detectable_at_90 > 0 for t in tests if t.p_value is not None)


def test_same_output_check_fails_on_a_sampler_that_ignores_its_coins() -> None:
    fixed = refserver_chain_sampler(fix_arm=True)
    generator = np.random.default_rng(1)

    def own_coins(*args, **kwargs):
        import torch

        args = list(args)
        args[7] = torch.as_tensor(generator.random(tuple(args[7].shape), dtype=np.float32))
        args[8] = torch.as_tensor(generator.random(tuple(args[8].shape), dtype=np.float32))
        return fixed(*args, **kwargs)

    broken = LoadedKernel(load_kernel("refserver").spec, "coin-ignoring sampler", "cpu (numpy)", "cpu", own_coins)
    data = build_input("well-formed", 0, SMALL)
    outcome = run_chain(broken, *data.arrays())
    reruns = {label: (rows, run_chain(broken, *data.rows(rows).arrays())) for label, rows in rerun_rows(data.batch).items()}
    assert not check_same_output(data, outcome, reruns).passed
    honest = load_kernel("refserver")
    outcome = run_chain(honest, *data.arrays())
    reruns = {label: (rows, run_chain(honest, *data.rows(rows).arrays())) for label, rows in rerun_rows(data.batch).items()}
    assert check_same_output(data, outcome, reruns).passed


@pytest.mark.parametrize(("source", "broken"), [("sglang==0.5.20", True), ("sglang==0.5.23", False)])
def test_padded_vocab_fallback_is_an_invalid_id(source: str, broken: bool) -> None:
    """At a padded vocabulary the fallback vocab-1 is past the tokenizer: 0.5.20 emits it on an
    +inf q row, 0.5.23 does not."""
    data = build_input("q-row-posinf", 0, SMALL)
    outcome = run_chain(load_kernel(source), *data.arrays())
    valid, fallback = check_valid_ids(data, outcome), check_no_unsupported_fallback(data, outcome)
    assert valid.passed is not broken and fallback.passed is not broken
    if broken:
        assert valid.example["emitted"][-1] == SMALL.kernel_vocab - 1 and "q-row-posinf" in valid.message()


def test_every_class_builds_at_glm_like_padding() -> None:
    for name in INPUT_CLASSES:
        data = build_input(name, 3, SMALL)
        assert data.target_probs[:, :, SMALL.tokenizer_vocab:].max() == 0  # padded rows: zero target probability
        assert data.draft_ids.min() >= 0 and data.draft_ids.max() < SMALL.kernel_vocab


def test_report_has_a_kernel_section_naming_the_failure() -> None:
    run = KernelSuiteRun(load_kernel("refserver:nofix"), SMALL, seed=0, alpha=0.001, distribution_rows=64)
    for name in ("well-formed", "q-row-posinf"):
        run.invariant(name, "valid-ids")
    results = {"run_id": "r", "status": "complete", "arms": {}, "kernel": run.to_dict()}
    text = render_markdown(build_report(Document.from_dict(results), [], []))
    assert "## Kernel suite" in text and "reference numpy sampler (nofix arm)" in text
    assert "| q-row-posinf | **FAIL** 16/16 |" in text and "no-unsupported-fallback [q-row-posinf]: row 0" in text
    assert "| well-formed | pass | pass | pass | pass | pass | pass |" in text
