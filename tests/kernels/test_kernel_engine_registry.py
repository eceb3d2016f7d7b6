"""The kernel-engine registry (specsuite/kernels/engines/): the built-in engines and what each declares, and a fourth
engine, Stubby (tests/helpers/stub_kernel_engine.py, one module), that the kernel suite's generic code loads, calls,
batches, checks and parametrizes without a line of it naming the engine: in process (its classes, its exact rule
check, its distribution family; its faulty arm fails the rule) and as a user runs the suite (a pytest subprocess with
the module as a plugin). Numpy only: no SGLang kernel, no vLLM child."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from specsuite.errors import SpecsuiteError
from specsuite.kernels import distribution, engines, rule_check
from specsuite.kernels.inputs import INPUT_CLASSES, VLLM_CLASSES, WELL_FORMED_CLASSES, KernelShape
from specsuite.kernels.invariants import INVARIANTS
from specsuite.kernels.loader import load_kernel
from specsuite.kernels.model_verifiers import model_kernel
from specsuite.kernels.suite import KernelSuiteRun
from tests.helpers import stub_kernel_engine
from tests.helpers.kernel_suite_runs import run_kernel_suite

SMALL = KernelShape(batch=16, kernel_vocab=512, tokenizer_vocab=500)


@pytest.fixture
def stubby() -> Iterator[engines.KernelEngine]:
    """Stubby registered for one test."""
    engines.register(stub_kernel_engine.STUBBY)
    try:
        yield stub_kernel_engine.STUBBY
    finally:
        engines.unregister(stub_kernel_engine.ENGINE)


def test_the_built_in_engines_and_what_each_declares():
    assert engines.names() == ("sglang", "refserver", "vllm") and engines.default_engine() is engines.get("sglang")
    for source, name in (("installed", "sglang"), ("sglang==0.5.23:block", "sglang"), ("x.py", "sglang"), ("refserver:nofix", "refserver"),
                         ("vllm-installed:expand-fix", "vllm"), ("vllm==0.32.0", "vllm")):
        if source != "x.py":  # a file source must exist to parse
            assert engines.for_source(source).name == name, source
    sglang, refserver, vllm = (engines.get(name) for name in ("sglang", "refserver", "vllm"))
    assert sglang.input_classes == refserver.input_classes == tuple(INPUT_CLASSES) and vllm.input_classes == tuple(VLLM_CLASSES)
    assert sglang.scenarios == refserver.scenarios == distribution.SCENARIOS and vllm.scenarios == distribution.ALL_SCENARIOS
    assert vllm.draws_own_coins and vllm.takes_whole_input
    assert not (sglang.draws_own_coins or sglang.takes_whole_input or refserver.draws_own_coins or refserver.takes_whole_input)
    assert engines.all_input_classes() == tuple(dict.fromkeys((*INPUT_CLASSES, *VLLM_CLASSES)))  # results' class order
    assert rule_check.draws_own_coins(model_kernel(False)) is False  # the numpy verifiers run as the refserver engine


def test_an_engine_is_what_its_own_module_registers(stubby):
    kernel = load_kernel("stubby")
    assert kernel.engine == "stubby" and engines.of(kernel) is stubby
    run = KernelSuiteRun(kernel, SMALL, seed=0, alpha=0.001, distribution_rows=256)
    assert run.classes == WELL_FORMED_CLASSES and run.scenarios == ("well-formed",)
    assert all(run.invariant(name, invariant).passed for name in run.classes for invariant in INVARIANTS)
    rule = run.verification_rule()  # it takes the coins: the exact row-by-row check, on rows split by nothing
    assert rule is not None and rule.passed and rule.rows == rule_check.RULE_ROWS, rule.message()
    family = run.distribution_family()
    assert {t.scenario for t in family} == {"well-formed"} and not [t.name for t in family if t.rejected]
    assert run.family_members == distribution.family_size(SMALL.steps, 1) == len([t for t in family if t.p_value is not None])
    record = run.to_dict()
    assert record["engine"] == "stubby" and record["classes"] == list(WELL_FORMED_CLASSES) and record["rule"]["passed"]
    with pytest.raises(SpecsuiteError, match="'stubby' is taken"):
        engines.register(stubby)


def test_its_faulty_arm_fails_the_generic_rule_check(stubby):
    check = KernelSuiteRun(load_kernel("stubby:accept-bias"), SMALL, seed=0, alpha=0.001).verification_rule()
    assert check is not None and not check.passed and check.longer > 0, check.message()
    with pytest.raises(SpecsuiteError, match="stubby's defects are accept-bias"):
        load_kernel("stubby:other")


def test_unregistered_its_source_is_unknown():
    with pytest.raises(SpecsuiteError, match="--kernel 'stubby': expected installed"):
        load_kernel("stubby")
    with pytest.raises(SpecsuiteError, match="unknown kernel engine 'stubby'"):
        engines.get("stubby")


def test_the_suite_as_a_user_runs_it_parametrizes_and_records_the_engine(tmp_path: Path):
    done, results = run_kernel_suite(tmp_path, "-p", "tests.helpers.stub_kernel_engine", "-rA", "--kernel", "stubby",
                                     "--kernel-vocab", "512", "--kernel-dist-rows", "128", timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    kernel = results["kernel"]
    assert kernel["engine"] == "stubby" and kernel["classes"] == list(WELL_FORMED_CLASSES) and kernel["rule"]["passed"]
    assert {t["scenario"] for t in kernel["distribution"]["tests"]} == {"well-formed"}
    passed = {line.split("::")[1] for line in done.stdout.splitlines() if line.startswith("PASSED suites/test_kernel.py::")}
    by_class = {name for name in passed if name.startswith("test_emitted_ids_within_tokenizer[")}
    assert by_class == {f"test_emitted_ids_within_tokenizer[{name}]" for name in WELL_FORMED_CLASSES}  # its classes, no others
    assert {name for name in passed if name.startswith("test_committed_sequence_matches_target[")} == {
        "test_committed_sequence_matches_target[well-formed]"}  # its one scenario
    assert "test_outcome_follows_the_verification_rule" in passed
