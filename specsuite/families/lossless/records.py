"""The lossless tests' records (``workloads.lossless``, specsuite/pytest_plugin/lossless.py): per setting its PIT and
two-sample results, the directed tests and greedy equality.  The results model keeps the section raw (`Workloads.part`);
`lossless_results` reads it typed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from specsuite.results.types import Record, Workloads


@dataclass
class LosslessSetting(Record):
    """One sampled setting of the lossless tests."""

    temperature: float | None = None
    top_p: float = 1.0
    sampling_params: dict[str, Any] | None = None  # what the generation requests sent, by SGLang's names (no seed)


@dataclass
class SpecCoverageRecord(Record):
    """How much of what a lossless test saw came from accepted drafts (positions >= 2)."""

    verify_steps: int = 0
    accepted_drafts: int = 0
    positions_after_first: int = 0
    accepted_draft_share: float | None = None


@dataclass
class PitUniformity(Record):
    """The PIT's uniformity test: KS and binned chi-square, Bonferroni (specsuite.families.lossless.pit.UniformityResult)."""

    n: int = 0
    alpha: float = 0.0
    ks_statistic: float | None = None
    ks_p: float | None = None
    chi2_statistic: float | None = None
    chi2_p: float | None = None
    p_value: float | None = None
    passed: bool = False
    bin_edges: list[float] = field(default_factory=list)
    bin_counts: list[int] = field(default_factory=list)
    expected_counts: list[float] = field(default_factory=list)
    mean: float | None = None
    mde_tv_body: float | None = None
    mde_tv_tail: float | None = None
    ks_critical_distance: float | None = None


@dataclass
class PitTailRate(Record):
    """The tail tokens drawn against the bounds of the tail's mass (specsuite.families.lossless.pit.TailRateResult)."""

    positions: int = 0
    draws: int = 0
    expected_low: float = 0.0
    expected_high: float = 0.0
    p_excess: float | None = None
    p_deficit: float | None = None
    p_value: float | None = None
    alpha: float = 0.0
    passed: bool = False


@dataclass
class LosslessPit(Record):
    """One setting's PIT calibration (LosslessWorkload.pit)."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {
        "setting": ("one", LosslessSetting), "coverage": ("one", SpecCoverageRecord), "test": ("one", PitUniformity),
        "tail": ("one", PitTailRate)}

    setting: LosslessSetting = field(default_factory=LosslessSetting)
    requests: int = 0
    max_new_tokens: int = 0
    top_k: int = 0
    positions: int = 0
    unresolved_nucleus: int = 0
    outside_support: int = 0
    given_top_k: bool = False
    coverage: SpecCoverageRecord = field(default_factory=SpecCoverageRecord)
    test: PitUniformity = field(default_factory=PitUniformity)
    tail: PitTailRate | None = None
    p_value: float | None = None
    passed: bool = False
    wall_time_s: float | None = None
    nucleus_gap: float | None = None  # top_p < 1: the numerics gap (nats at T) a nucleus edge must clear to be decided
    nucleus_rule: str | None = None  # the served dtype's rule it came from (NearTie.describe)


@dataclass
class TokenHomogeneity(Record):
    """The two-sample chi-square per position, Holm-adjusted (specsuite.families.lossless.two_sample.HomogeneityResult)."""

    positions: list[int] = field(default_factory=list)
    statistics: list[float] = field(default_factory=list)
    dofs: list[int] = field(default_factory=list)
    p_values: list[float] = field(default_factory=list)
    adjusted_p_values: list[float] = field(default_factory=list)
    p_value: float | None = None  # the smallest adjusted p-value
    alpha: float = 0.0
    passed: bool = False
    samples_per_arm: int = 0
    prompts: int = 0
    mde_token_probability: float | None = None


@dataclass
class LoglikCalibration(Record):
    """The log-likelihood calibration z (specsuite.families.lossless.two_sample.CalibrationResult)."""

    z: float | None = None
    p_value: float | None = None
    alpha: float = 0.0
    passed: bool = False
    mean_difference_nats: float | None = None
    mde_nats: float | None = None
    prompts: int = 0


@dataclass
class TwoSampleTailMass(Record):
    """Tokens outside the reference's top-K per sample, test arm against reference (T != 1, top_p 1;
    specsuite.families.lossless.two_sample.TailMassResult)."""

    z: float | None = None
    p_value: float | None = None
    alpha: float = 0.0
    passed: bool = False
    mean_difference: float | None = None
    reference_tail_tokens: float | None = None
    mde_tail_tokens: float | None = None
    mde_ratio_low: float | None = None
    mde_ratio_high: float | None = None
    prompts: int = 0


@dataclass
class LosslessTwoSample(Record):
    """One setting's two-sample test against the speculation-off reference (LosslessWorkload.two_sample)."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {
        "setting": ("one", LosslessSetting), "coverage": ("one", SpecCoverageRecord), "homogeneity": ("one", TokenHomogeneity),
        "calibration": ("one", LoglikCalibration), "tail": ("one", TwoSampleTailMass)}

    setting: LosslessSetting = field(default_factory=LosslessSetting)
    prompts: int = 0
    samples_per_prompt: int = 0
    positions: list[int] = field(default_factory=list)
    coverage: SpecCoverageRecord = field(default_factory=SpecCoverageRecord)
    homogeneity: TokenHomogeneity | None = None
    calibration: LoglikCalibration | None = None
    passed: bool = False
    wall_time_s: float | None = None
    tail: TwoSampleTailMass | None = None  # T != 1 with top_p 1 only


@dataclass
class TopTokenRate(Record):
    """The directed mode-rate test: is the target's mode drawn more often than it gives (one-sided z)?"""

    n: int = 0
    observed: int = 0
    expected: float = 0.0
    z: float = 0.0
    p_value: float | None = None
    alpha: float = 0.0
    passed: bool = False
    excess_rate: float | None = None
    excess_rate_ci95: list[float] | None = None
    mde_excess_rate: float | None = None


@dataclass
class AcceptanceBetting(Record):
    """The directed test martingale of accepted / p over draft-evaluated positions (anytime-valid)."""

    draft_positions: int = 0
    accepted: int = 0
    mean_weighted_acceptance: float | None = None
    log_e_value: float = 0.0
    max_log_e_value: float = 0.0
    p_value: float | None = None
    alpha: float = 0.0
    passed: bool = False
    applicable: bool = False


@dataclass
class LosslessDirected(Record):
    """The directed tests, pooled over the settings with top_p 1 and their PIT and two-sample generations."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {
        "top_token_rate": ("one", TopTokenRate), "acceptance_betting": ("one", AcceptanceBetting)}

    settings: list[str] = field(default_factory=list)
    sources: dict[str, int] = field(default_factory=dict)  # "<setting> <source>" -> positions
    top_token_rate: TopTokenRate | None = None
    acceptance_betting: AcceptanceBetting | None = None


@dataclass
class NearTieRule(Record):
    """The greedy comparison's near-tie tolerance and where it came from (specsuite.families.lossless.greedy.NearTie)."""

    dtype: str | None = None  # None: the tolerance was given (--lossless-numerics-gap)
    tolerance: float = 0.0
    source: str = ""


@dataclass
class GreedyDivergence(Record):
    """Where one greedy output first left the reference's, and why that counts as numerics or real."""

    prompt_index: int = 0
    position: int = 0  # 1-based
    test_token: int | None = None  # None: the output ended here
    reference_token: int | None = None
    top2_gap: float | None = None  # None when the reference has no top-2 there
    kind: str = ""  # "numerics" | "real"
    reason: str = ""
    below_top: float | None = None


@dataclass
class GreedyConcurrency(Record):
    """Greedy equality at one client concurrency (specsuite.families.lossless.greedy.GreedyResult)."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {"near_tie": ("one", NearTieRule), "divergences": ("list", GreedyDivergence)}

    concurrency: int = 0
    prompts: int = 0
    equal: int = 0
    numerics: int = 0
    real: int = 0
    passed: bool = False
    numerics_gap: float | None = None
    near_tie: NearTieRule | None = None
    divergences: list[GreedyDivergence] = field(default_factory=list)
    near_tie_test: str | None = None  # the near-tie flip count's tests, stated (greedy.NearTieExcess.describe)
    near_tie_excess: bool | None = None


@dataclass
class LosslessGreedy(Record):
    """Greedy equality with the reference at every concurrency (LosslessWorkload.greedy)."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {"concurrencies": ("list", GreedyConcurrency), "near_tie": ("one", NearTieRule)}

    prompts: int = 0
    max_new_tokens: int = 0
    sampling_params: dict[str, Any] | None = None  # what the T=0 requests sent, by SGLang's names
    concurrencies: list[GreedyConcurrency] = field(default_factory=list)
    passed: bool = False
    near_tie: NearTieRule | None = None
    wall_time_s: float | None = None

    def real_divergences(self) -> int:
        return sum(int(run.real or 0) for run in self.concurrencies)


@dataclass
class LosslessResults(Record):
    """A session's lossless tests (``workloads.lossless``, specsuite/pytest_plugin/lossless.py): per setting its PIT and
    two-sample results, the directed tests and greedy equality."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {
        "pit": ("map", LosslessPit), "two_sample": ("map", LosslessTwoSample), "directed": ("one", LosslessDirected),
        "greedy": ("one", LosslessGreedy)}

    config: dict[str, Any] = field(default_factory=dict)  # the sizes and knobs it ran with (LosslessConfig)
    reference: dict[str, Any] = field(default_factory=dict)  # the speculation-off reference (ReferenceServer.description)
    draft_steps: int | None = None
    pit: dict[str, LosslessPit] = field(default_factory=dict)  # setting key -> result
    two_sample: dict[str, LosslessTwoSample] = field(default_factory=dict)
    directed: LosslessDirected | None = None
    greedy: LosslessGreedy | None = None


def lossless_results(workloads: Workloads) -> LosslessResults | None:
    """A repeat's lossless tests, typed (None when it wrote none, or not as an object)."""
    written = workloads.part("lossless")
    return LosslessResults.from_dict(written) if isinstance(written, dict) else None
