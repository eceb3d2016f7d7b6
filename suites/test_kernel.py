"""The kernel suite: SGLang's chain rejection sampler on well-formed and corrupted inputs, no server.

    pytest suites/ -m kernel --kernel sglang==0.5.23

Invariants, one test per input class (harness/kernels/inputs.py), each failing with the class
and one example row; distribution tests on well-formed input (exact binomial for acceptance,
chi-square for the emitted token, Holm across the family), with p-values in results.json.
"""

from __future__ import annotations

import pytest

from harness.kernels.distribution import SCENARIOS
from harness.kernels.inputs import INPUT_CLASSES
from harness.kernels.suite import KernelSuiteRun

pytestmark = [pytest.mark.kernel, pytest.mark.usefixtures("record_kernel_results")]
CLASSES = list(INPUT_CLASSES)


def _assert_invariant(kernel_suite: KernelSuiteRun, input_class: str, invariant: str) -> None:
    outcome = kernel_suite.invariant(input_class, invariant)
    assert outcome.passed, f"{kernel_suite.kernel.label}: {outcome.message()}"


@pytest.mark.parametrize("input_class", CLASSES)
def test_emitted_ids_within_tokenizer(kernel_suite: KernelSuiteRun, input_class: str) -> None:
    _assert_invariant(kernel_suite, input_class, "valid-ids")


@pytest.mark.parametrize("input_class", CLASSES)
def test_no_fallback_without_target_mass(kernel_suite: KernelSuiteRun, input_class: str) -> None:
    _assert_invariant(kernel_suite, input_class, "no-unsupported-fallback")


@pytest.mark.parametrize("input_class", CLASSES)
def test_invalid_draft_q_never_accepted(kernel_suite: KernelSuiteRun, input_class: str) -> None:
    _assert_invariant(kernel_suite, input_class, "no-invalid-q-accepted")


@pytest.mark.parametrize("input_class", CLASSES)
def test_same_coins_same_output(kernel_suite: KernelSuiteRun, input_class: str) -> None:
    _assert_invariant(kernel_suite, input_class, "same-coins-same-output")


def _assert_family_member(kernel_suite: KernelSuiteRun, scenario: str, test: str) -> None:
    tests = kernel_suite.scenario_tests(scenario, test)
    tested = [t for t in tests if t.p_value is not None]
    if not tested:  # a claim about too few rows, not about the kernel: never a failure
        pytest.skip(f"{scenario}: no {test} test had enough rows (--kernel-dist-rows {kernel_suite.distribution_rows}): "
                    + "; ".join(t.note for t in tests))
    fired = [t for t in tested if t.rejected]
    assert not fired, (f"{kernel_suite.kernel.label}: {scenario}: " + "; ".join(
        f"{t.test} at position {t.position}: n {t.n}, p {t.p_value:.3g}, Holm-adjusted {t.adjusted_p:.3g} <= alpha {kernel_suite.alpha:g}"
        + (f", {t.statistic.get('outside_support')} ids outside the target's support" if t.statistic.get("outside_support") else "")
        + (f", accepted {t.statistic['accepted']} (rate {t.statistic['observed_rate']:.4f}, expected {t.statistic['expected_rate']:.4f})"
           if "accepted" in t.statistic else "")
        for t in fired))


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_acceptance_matches_min_p_over_q(kernel_suite: KernelSuiteRun, scenario: str) -> None:
    _assert_family_member(kernel_suite, scenario, "acceptance")


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_emitted_token_matches_target(kernel_suite: KernelSuiteRun, scenario: str) -> None:
    _assert_family_member(kernel_suite, scenario, "emitted")
