"""The kernel suite: a speculative sampler on well-formed and corrupted inputs, no server.

    pytest suites/ -m kernel --kernel sglang==0.5.23            # SGLang's chain sampler, token verification
    pytest suites/ -m kernel --kernel sglang==0.5.23:block      # the same kernel, block verification
    pytest suites/ -m kernel --kernel vllm-installed            # vLLM's rejection sampler (its own Python)

Invariants, one test per input class (specsuite/kernels/inputs.py; the classes depend on the engine),
each failing with the class and one example row; the verification rule itself (token or block, from
the papers' math: specsuite/kernels/rule_check.py), row by row on its own input where the sampler takes the
coins, so that any acceptance bias that moves one row is caught, and by an exact test of the rows' total
accepted count where it draws its own (vLLM); distribution tests on well-formed input that hold for
any lossless verifier (the committed block, continued from the target, against the target: per position
and per adjacent pair), the acceptance test for token verification, and for block verification its
accepted length against token verification's on the same rows; Holm across the family, p-values in
results.json.
"""

from __future__ import annotations

import pytest

from specsuite.errors import SpecsuiteError
from specsuite.kernels import engines
from specsuite.kernels.distribution import RULE_SCENARIO
from specsuite.kernels.suite import KernelSuiteRun

pytestmark = [pytest.mark.kernel, pytest.mark.usefixtures("record_kernel_results")]
GREEDY_CLASSES = ("greedy", "mixed-greedy-random")


def _engine(config: pytest.Config) -> engines.KernelEngine:
    """The engine --kernel names, known from the option before anything is loaded; the default source's without it,
    or when the source is bad (reported as one line when the kernel is loaded)."""
    from specsuite.pytest_plugin.core import specsuite_session  # the run configuration's kernel section

    source = specsuite_session(config).run_config.kernel.source
    try:
        return engines.for_source(source) if source else engines.default_engine()
    except SpecsuiteError:
        return engines.default_engine()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize by the classes and scenarios of the engine --kernel names (the default source's without it)."""
    engine = _engine(metafunc.config)
    if "input_class" in metafunc.fixturenames:
        classes = list(engine.input_classes)
        if metafunc.function.__name__ == "test_greedy_rows_commit_the_argmax":
            classes = [c for c in classes if c in GREEDY_CLASSES]
        metafunc.parametrize("input_class", classes)
    if "scenario" in metafunc.fixturenames:
        metafunc.parametrize("scenario", list(engine.scenarios))


def _assert_invariant(kernel_suite: KernelSuiteRun, input_class: str, invariant: str) -> None:
    outcome = kernel_suite.invariant(input_class, invariant)
    assert outcome.passed, f"{kernel_suite.kernel.label}: {outcome.message()}"


def test_emitted_ids_within_tokenizer(kernel_suite: KernelSuiteRun, input_class: str) -> None:
    _assert_invariant(kernel_suite, input_class, "valid-ids")


def test_no_fallback_without_target_mass(kernel_suite: KernelSuiteRun, input_class: str) -> None:
    _assert_invariant(kernel_suite, input_class, "no-unsupported-fallback")


def test_invalid_draft_q_never_accepted(kernel_suite: KernelSuiteRun, input_class: str) -> None:
    _assert_invariant(kernel_suite, input_class, "no-invalid-q-accepted")


def test_same_coins_same_output(kernel_suite: KernelSuiteRun, input_class: str) -> None:
    _assert_invariant(kernel_suite, input_class, "same-coins-same-output")


def test_committed_ids_within_target_support(kernel_suite: KernelSuiteRun, input_class: str) -> None:
    _assert_invariant(kernel_suite, input_class, "in-target-support")


def test_greedy_rows_commit_the_argmax(kernel_suite: KernelSuiteRun, input_class: str) -> None:
    _assert_invariant(kernel_suite, input_class, "greedy-rows-argmax")


def _describe(test) -> str:
    text = f"{test.test} at position {test.position}: n {test.n}, p {test.p_value:.3g}, Holm-adjusted {test.adjusted_p:.3g}"
    statistic = test.statistic
    if statistic.outside_support:
        text += f", {statistic.outside_support} ids outside the target's support"
    if statistic.has("accepted"):
        text += f", accepted {statistic.accepted} (rate {statistic.observed_rate:.4f}, expected {statistic.expected_rate:.4f})"
    if statistic.has("observed_total"):
        text += f", total accepted {statistic.observed_total} vs the rule's expected {statistic.expected_total:.1f}"
    if statistic.has("mean_difference"):
        text += (f", block {statistic.block_mean_accepted:.3f} vs token {statistic.token_mean_accepted:.3f} accepted drafts, "
                 f"difference 95% CI {statistic.difference_ci95}")
    return text


def _assert_family_member(kernel_suite: KernelSuiteRun, scenario: str, tests_named: tuple[str, ...]) -> None:
    tests = [t for t in kernel_suite.distribution_family() if t.scenario == scenario and t.test in tests_named]
    tested = [t for t in tests if t.p_value is not None]
    if not tested:  # a claim about too few rows, not about the kernel: never a failure
        pytest.skip(f"{scenario}: no {'/'.join(tests_named)} test had enough rows (--kernel-dist-rows "
                    f"{kernel_suite.distribution_rows}): " + "; ".join(t.note for t in tests))
    fired = [t for t in tested if t.rejected]
    assert not fired, (f"{kernel_suite.kernel.label}: {scenario}: " + "; ".join(_describe(t) for t in fired)
                       + f" (alpha {kernel_suite.alpha:g})")


def test_acceptance_matches_min_p_over_q(kernel_suite: KernelSuiteRun, scenario: str) -> None:
    if kernel_suite.kernel.verification == "block":
        pytest.skip("block verification: the per-token acceptance rule does not apply (its accepted length is tested instead)")
    _assert_family_member(kernel_suite, scenario, ("acceptance",))


def test_committed_sequence_matches_target(kernel_suite: KernelSuiteRun, scenario: str) -> None:
    _assert_family_member(kernel_suite, scenario, ("sequence-marginal", "sequence-pair"))


def test_outcome_follows_the_verification_rule(kernel_suite: KernelSuiteRun) -> None:
    check = kernel_suite.verification_rule()
    if check is None:  # a sampler with its own coins: the family's exact total-length test, Holm-adjusted with the rest
        _assert_family_member(kernel_suite, RULE_SCENARIO, ("rule-total",))
        return
    assert check.passed, f"{kernel_suite.kernel.label}: {check.message()}"


def test_block_accepts_at_least_token_verification(kernel_suite: KernelSuiteRun, scenario: str) -> None:
    if kernel_suite.kernel.verification != "block":
        pytest.skip("token verification: the block-versus-token length comparison is for block verification")
    _assert_family_member(kernel_suite, scenario, ("accepted-length",))
