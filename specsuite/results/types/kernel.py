"""The kernel suite's records (specsuite.kernels.suite): its section of a results document, and what its
distribution tests saw as they ran."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from specsuite.results.types.record import Record


@dataclass
class InvariantOutcome(Record):
    """One invariant on one input class (specsuite.kernels.invariants): passed, or how many rows broke it."""

    input_class: str = ""
    invariant: str = ""
    passed: bool = False
    violations: int | None = None
    rows: int | None = None
    example: dict[str, Any] | None = None  # one row where it broke


@dataclass
class DistributionTest(Record):
    """One distribution test on well-formed input (specsuite.kernels.distribution): what it saw and its p-value."""

    name: str = ""
    n: int | None = None
    observed_rate: float | None = None
    expected_rate: float | None = None
    mean_difference: float | None = None
    difference_ci95: list[float] | None = None
    x2: float | None = None
    chi2: float | None = None
    categories: int | None = None
    p_value: float | None = None
    adjusted_p: float | None = None
    detectable_at_90_power: float | None = None
    rejected: bool | None = None
    note: str | None = None


@dataclass
class KernelDistribution(Record):
    """The distribution family: its tests, corrected together."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {"tests": ("list", DistributionTest)}

    correction: str | None = None
    family_size: int | None = None
    power: float | None = None
    tests: list[DistributionTest] = field(default_factory=list)


@dataclass
class KernelSection(Record):
    """The kernel suite's run (specsuite.kernels.suite): the kernel, its invariants and distribution tests."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {
        "invariants": ("list", InvariantOutcome), "distribution": ("one", KernelDistribution)}

    label: str | None = None
    kernel: str | None = None  # the --kernel value
    sha256: str | None = None  # the kernel file's; None for the reference numpy sampler
    device: str | None = None
    engine: str | None = None
    verification: str | None = None
    shape: dict[str, Any] | None = None  # batch, steps, kernel_vocab, tokenizer_vocab
    seed: int | None = None
    alpha: float | None = None
    classes: list[str] = field(default_factory=list)
    rules: dict[str, str] | None = None  # invariant -> what it requires
    invariants: list[InvariantOutcome] = field(default_factory=list)
    failing: list[str] = field(default_factory=list)
    distribution: KernelDistribution | None = None
    seconds: float | None = None

    def by_class(self) -> dict[str, dict[str, InvariantOutcome]]:
        """input class -> invariant -> outcome, in the order written."""
        found: dict[str, dict[str, InvariantOutcome]] = {}
        for outcome in self.invariants or []:
            found.setdefault(outcome.input_class, {})[outcome.invariant] = outcome
        return found


# ---------------------------------------------------------------- the kernel suite's distribution tests, as they run


@dataclass
class MonteCarloResolution(Record):
    """What a kernel distribution family's Monte Carlo X^2 tests can reach (specsuite.kernels.distribution)."""

    draws: int = 0
    smallest_p_value: float = 1.0
    family_size: int = 0
    largest_family_x2_can_reject: int = 0
    x2_can_reject: bool = False


@dataclass
class KernelTestStatistic(Record):
    """What one kernel distribution test saw, written beside its p-value: the X^2 tests' categories and statistic,
    the acceptance test's counts, the accepted-length test's means, the rule test's totals (and its details in extra)."""

    categories: int | None = None
    outside_support: int | None = None  # ids the target gives zero probability
    min_expected: float | None = None
    x2: float | None = None
    monte_carlo_draws: int | None = None
    monte_carlo_seed: int | None = None
    from_sampler: int | None = None  # rows whose token at the position came from the sampler
    accepted: int | None = None
    observed_rate: float | None = None
    expected_rate: float | None = None
    block_mean_accepted: float | None = None
    token_mean_accepted: float | None = None
    mean_difference: float | None = None
    difference_ci95: list[float] | None = None
    rows_block_longer: int | None = None
    rows_token_longer: int | None = None
    verification: str | None = None
    observed_total: float | None = None
    expected_total: float | None = None
