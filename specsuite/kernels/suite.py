"""One kernel-suite run: a loaded sampler, the shapes and seeds, each input class run once and
checked against every invariant, the verification rule checked row by row on its own input
(specsuite.kernels.rule_check), the distribution family run once; all of it as a JSON-ready dict
for results.json.  The pytest layer (suites/test_kernel.py) only asks and asserts.

Which classes and scenarios run, how the sampler is called and how the rule is checked is the engine's to say
(specsuite/kernels/engines/: SGLang's kernels and the numpy sampler get the corrupted-q classes, the recycled-draft_probs
bug's -inf mask and other malformed q; vLLM's sampler gets its sampling paths on well-formed q)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from specsuite.kernels import distribution, engines, rule_check
from specsuite.kernels.inputs import KernelShape, build_input
from specsuite.kernels.invariants import (
    INVARIANT_RULES,
    INVARIANTS,
    InvariantOutcome,
    check_greedy_rows,
    check_in_target_support,
    check_no_invalid_q_accepted,
    check_no_unsupported_fallback,
    check_same_output,
    check_valid_ids,
    rerun_rows,
)
from specsuite.kernels.invoke import run_input
from specsuite.kernels.loader import LoadedKernel
from specsuite.results.types import MonteCarloResolution


def classes_for(engine: str) -> tuple[str, ...]:
    return engines.get(engine).input_classes


@dataclass
class KernelSuiteRun:
    """Lazily computed, cached outcomes of the kernel suite for one sampler."""

    kernel: LoadedKernel
    shape: KernelShape
    seed: int
    alpha: float
    distribution_rows: int = distribution.DEFAULT_ROWS
    invariants: dict[str, dict[str, InvariantOutcome]] = field(default_factory=dict)  # class -> invariant -> outcome
    distribution_tests: list[distribution.DistributionTest] | None = None
    rule: rule_check.RuleCheck | None = None
    seconds: dict[str, float] = field(default_factory=dict)  # kernel time per class / the distribution family

    def invariant(self, input_class: str, name: str) -> InvariantOutcome:
        if input_class not in self.invariants:
            self.invariants[input_class] = self._run_class(input_class)
        return self.invariants[input_class][name]

    def _run_class(self, input_class: str) -> dict[str, InvariantOutcome]:
        started = time.perf_counter()
        data = build_input(input_class, self.seed, self.shape)
        outcome = run_input(self.kernel, data)
        reruns = {label: (rows, run_input(self.kernel, data.rows(rows))) for label, rows in rerun_rows(data.batch).items()}
        self.seconds[input_class] = time.perf_counter() - started
        checks = [check_valid_ids(data, outcome), check_no_unsupported_fallback(data, outcome),
                  check_no_invalid_q_accepted(data, outcome), check_same_output(data, outcome, reruns),
                  check_in_target_support(data, outcome), check_greedy_rows(data, outcome)]
        return {check.invariant: check for check in checks}

    @property
    def classes(self) -> tuple[str, ...]:
        return classes_for(self.kernel.engine)

    @property
    def scenarios(self) -> tuple[str, ...]:
        return distribution.scenarios_for(self.kernel)

    def distribution_family(self) -> list[distribution.DistributionTest]:
        """Every scenario's tests (specsuite.kernels.distribution.run_family), Holm-adjusted together."""
        if self.distribution_tests is None:
            started = time.perf_counter()
            self.distribution_tests, per_scenario = distribution.run_family(self.kernel, self.shape, self.seed,
                                                                            self.distribution_rows, self.alpha)
            self.seconds.update({f"distribution:{name}": value for name, value in per_scenario.items()})
            self.seconds["distribution"] = time.perf_counter() - started
        return self.distribution_tests

    def verification_rule(self) -> rule_check.RuleCheck | None:
        """The exact check of the verification rule on the rule input (specsuite.kernels.rule_check); None for a
        sampler that draws its own coins, whose rule test is a member of the distribution family instead."""
        if rule_check.draws_own_coins(self.kernel):
            return None
        if self.rule is None:
            started = time.perf_counter()
            self.rule = rule_check.rule_check_for(self.kernel, self.shape, self.seed)
            self.seconds["rule"] = time.perf_counter() - started
        return self.rule

    @property
    def family_members(self) -> int:
        return distribution.kernel_family_size(self.kernel, self.shape.steps)

    def monte_carlo(self) -> MonteCarloResolution:
        """The family's Monte Carlo resolution (specsuite.kernels.distribution.monte_carlo_resolution)."""
        members = self.family_members
        return distribution.monte_carlo_resolution(distribution.monte_carlo_draws(members, self.alpha), self.alpha, members)

    def scenario_tests(self, scenario: str, test: str) -> list[distribution.DistributionTest]:
        return [t for t in self.distribution_family() if t.scenario == scenario and t.test == test]

    def failing_classes(self) -> dict[str, list[str]]:
        """invariant -> the classes it failed on, among the classes run so far."""
        failing: dict[str, list[str]] = {}
        for input_class, outcomes in self.invariants.items():
            for name, outcome in outcomes.items():
                if not outcome.passed:
                    failing.setdefault(name, []).append(input_class)
        return failing

    def to_dict(self) -> dict[str, Any]:
        order = engines.all_input_classes()
        return {
            **self.kernel.to_dict(),
            "shape": self.shape.to_dict(),
            "seed": self.seed,
            "alpha": self.alpha,
            "rules": INVARIANT_RULES,
            "classes": [c for c in order if c in self.invariants],
            "invariants": [self.invariants[c][name].to_dict() for c in order if c in self.invariants for name in INVARIANTS],
            "failing": self.failing_classes(),
            "distribution": {
                "verification": self.kernel.verification,
                "rows_per_scenario": {s: distribution.scenario_rows(s, self.distribution_rows) for s in self.scenarios},
                "family_size": len([t for t in self.distribution_tests or [] if t.p_value is not None]),
                "correction": "holm",
                "power": distribution.POWER,
                "monte_carlo": self.monte_carlo().to_dict(),
                "tests": [t.to_dict() for t in self.distribution_tests or []],
            },
            "rule": None if self.rule is None else {"seed": rule_check.rule_seed(self.seed), **self.rule.to_dict()},
            "seconds": self.seconds,
        }
