"""Distribution tests of a chain sampler on well-formed inputs: tests that hold for any lossless
verifier, token-by-token or block (scipy.stats, with stated power; which tests are exact and which
asymptotic is said per test below).

One fixed chain (a target p_j and a draft q_j per position, each on a few ids, so every category has
enough counts) is repeated over many rows, each row with its own drafts (drawn from q_j) and coins.
Because the chain is the same whatever was drafted, it is a target model whose conditional at position j
is p_j for every prefix: sampling it token by token gives independent Z_j ~ p_j.  A lossless verifier's
committed block, continued token by token from p past its end (by us, seeded), is such a sample whatever
the verifier does inside the block (Sun et al., "Block Verification Accelerates Speculative Decoding",
Theorem 1; Leviathan et al. for token verification).  So, per scenario:

- sequence marginal at position j = 0..k: Z_j against p_j (Pearson X^2, p-value by Monte Carlo under the
  fully specified multinomial null: valid in level, but never below 1/(R+1) with R null draws; R is raised
  with the family, see `monte_carlo_draws`, so that Holm's first step, at alpha / family size, is
  reachable; an id outside p_j's support is an impossible event and gives p = 0);
- sequence pair at positions (j, j+1): (Z_j, Z_{j+1}) against p_j x p_{j+1} (the same test over the
  product's cells): the block's tokens must also be jointly right, not only one at a time;
- acceptance at draft step j (token verification only): among rows that reached step j, the accepted
  count is Binomial(n, a_j), a_j = sum_x q(x) min(1, p(x)/q(x)) (sum_x q(x) p(x) when the sampler is not
  shown q), by the exact two-sided binomial test.  Block verification accepts differently by design;
- for block verification: on the same inputs and coins, its mean accepted length minus token
  verification's (Sun et al., Theorem 2: not below 0), a paired t test and interval; it fails when the
  one-sided test says the mean difference is below 0.  Asymptotic, not exact: the differences are bounded
  integers in [-k, k], and the t distribution is their mean's large-sample law (1,024 rows here);
- for a sampler that draws its own coins (vLLM), the rule test of specsuite.kernels.rule_check: the rows'
  total accepted count against its exact distribution given the drafts (an exact test).  A sampler that
  takes the coins (SGLang's kernel) is held to the rule row by row instead, outside this family (no
  p-value: specsuite/kernels/suite.py).

Here p_j is the target after the rows' temperature and top-p for engines that take logits (vLLM).
Holm's correction runs over every test of the session's family.  Power is stated for each test as the
smallest deviation it detects with 90% probability at its Bonferroni level (alpha / family size, which
Holm's first step uses): exactly for the binomial test (from its rejection region); as Cohen's w from the
noncentral chi-square for the X^2 tests and in accepted tokens from the normal approximation for the
length tests (both asymptotic, and for X^2 only while the Monte Carlo p-value can reach that level:
`monte_carlo_resolution`, in results.json and the session's header line).
tools/calibration/kernel_sequence_power.py measures the family's power against stated broken verifiers
by simulation; tools/calibration/kernel_rule_power.py the rule check's.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from specsuite.errors import SpecsuiteError
from specsuite.kernels import engines, rule_check
from specsuite.kernels.inputs import ChainInput, KernelShape, apply_temperature_top_p, clear_top_p, draw_ids, masked_logits, sampling_targets
from specsuite.kernels.invoke import ChainOutcome, run_all_rows
from specsuite.kernels.loader import LoadedKernel
from specsuite.results.types import KernelTestStatistic, MonteCarloResolution
from specsuite.stats.lazy_scipy import optimize, stats
from specsuite.stats.multiplicity import holm

SUPPORT = 8  # ids per target row: 8 categories, each expected >= 5 times at the default rows
POWER = 0.9
MIN_EXPECTED = 5.0  # a marginal with fewer expected counts per category is not tested (reported)
MONTE_CARLO_DRAWS = 100_000  # the fewest null draws per X^2 test: p-values down to 1e-5
MONTE_CARLO_MARGIN = 2  # draws raised so that 1/(draws+1) is at most Holm's first level / this (memory: 8 bytes a draw a test)
MONTE_CARLO_SEED = 20261205
SCENARIOS = ("well-formed", "p-equals-q")  # on probabilities: every engine's; an engine names its own (specsuite/kernels/engines/)
ALL_SCENARIOS = (*SCENARIOS, "no-draft-probs", "temperature-top-p")  # in seed order: a scenario's input seed is its index here
DEFAULT_ROWS = 1024
# p == q accepts every draft (its acceptance test is exact: one rejection fires it), so it needs
# fewer rows than the well-formed chain; its sequence tests get the power stated for them.
ROW_SHARE = {"well-formed": 1.0, "p-equals-q": 0.25, "no-draft-probs": 1.0, "temperature-top-p": 1.0}
TEMPERATURE = 0.8  # the temperature-top-p scenario's rows; its top-p keeps TOP_P_KEEP of SUPPORT ids
TOP_P_KEEP = 6
RULE_SCENARIO = "rule"  # the rule input's family member (own-coin samplers only)


def scenarios_for(kernel: LoadedKernel) -> tuple[str, ...]:
    return engines.of(kernel).scenarios


def scenario_rows(scenario: str, rows: int) -> int:
    return max(1, int(round(rows * ROW_SHARE[scenario])))


@dataclass
class DistributionTest:
    """One test of the family, before and after Holm's correction."""

    scenario: str
    test: str  # "acceptance", "sequence-marginal", "sequence-pair" or "accepted-length"
    position: int  # draft step (acceptance), position j (marginal; pair (j, j+1)); -1 for the length test
    n: int
    p_value: float | None  # None: not tested (too few rows), see `note`
    statistic: KernelTestStatistic = field(default_factory=KernelTestStatistic)
    detectable_at_90: float | None = None  # rate shift (acceptance), Cohen's w (X^2), tokens (length)
    adjusted_p: float | None = None
    rejected: bool = False
    note: str = ""

    @property
    def name(self) -> str:
        return f"{self.scenario}/{self.test}@{self.position}"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "scenario": self.scenario, "test": self.test, "position": self.position, "n": self.n,
                "p_value": self.p_value, "adjusted_p": self.adjusted_p, "rejected": self.rejected,
                "detectable_at_90_power": self.detectable_at_90, "note": self.note, **self.statistic.to_dict()}


def _chain_rows(rng: np.random.Generator, shape: KernelShape, scenario: str) -> tuple[np.ndarray, np.ndarray]:
    """One (k+1, V) target chain and its (k, V) draft chain, float32."""
    vocab, tokenizer = shape.kernel_vocab, shape.tokenizer_vocab
    target = np.zeros((shape.steps + 1, vocab))
    draft = np.zeros((shape.steps, vocab))
    for step in range(shape.steps + 1):
        ids = rng.choice(tokenizer - 1, size=SUPPORT, replace=False)
        weights = rng.dirichlet(np.full(SUPPORT, 3.0)) + 0.03
        target[step, ids] = weights / weights.sum()
        if step < shape.steps:
            if scenario == "p-equals-q":
                draft[step] = target[step]
                continue
            # Half of q's support overlaps p's: rejections happen, the residual is not p itself.
            other = np.concatenate([ids[: SUPPORT // 2], rng.choice(tokenizer - 1, size=SUPPORT // 2, replace=False)])
            noise = np.zeros(vocab)
            np.add.at(noise, other, rng.dirichlet(np.full(SUPPORT, 2.0)))
            draft[step] = 0.5 * target[step] + 0.5 * noise  # acceptance about 0.65: rejections and residuals matter
    return target.astype(np.float32), draft.astype(np.float32)


def distribution_input(scenario: str, seed: int, shape: KernelShape, rows: int, chain_seed: int | None = None) -> ChainInput:
    """The scenario's rows; the chain itself from `chain_seed` when given (else from `seed`, as the suite
    does), so a simulation can hold the chain fixed and redraw only drafts and coins."""
    if scenario not in ALL_SCENARIOS:
        raise SpecsuiteError(f"unknown distribution scenario {scenario!r}; known: {', '.join(ALL_SCENARIOS)}")
    if rows < 1:
        raise SpecsuiteError(f"--kernel-dist-rows must be at least 1, got {rows}")
    rng = np.random.default_rng(seed)
    target, draft = _chain_rows(rng if chain_seed is None else np.random.default_rng(chain_seed), shape, scenario)
    targets = np.broadcast_to(target, (rows, *target.shape))
    drafts = np.broadcast_to(draft, (rows, *draft.shape))
    ids = draw_ids(rng, np.broadcast_to(draft.astype(np.float64), (rows, *draft.shape)))
    coins = rng.random((rows, shape.steps), dtype=np.float32)
    final = rng.random(rows, dtype=np.float32)
    made = ChainInput(f"distribution:{scenario}", targets, drafts, ids, coins, final, shape.tokenizer_vocab, seed)
    if scenario == "no-draft-probs":
        return replace(made, with_draft_probs=False)
    if scenario == "temperature-top-p":
        temperature = np.full(rows, TEMPERATURE, dtype=np.float32)
        processed = apply_temperature_top_p(masked_logits(target[None]), temperature[:1], None)[0]
        chosen = clear_top_p(processed, TOP_P_KEEP)
        top_p = None if chosen is None else np.full(rows, chosen, dtype=np.float32)
        return replace(made, temperature=temperature, top_p=top_p)
    return made


def acceptance_rate(target_row: np.ndarray, draft_row: np.ndarray, shown_q: bool = True) -> float:
    """a = sum_x q~(x) min(1, p(x)/q(x)): X drawn from q~ (q renormalised, as the drafts were); without
    q shown to the sampler it accepts X with probability p(X) (q taken as a point mass at X)."""
    p = target_row.astype(np.float64)
    q = draft_row.astype(np.float64)
    drawn = q / q.sum()
    if not shown_q:
        return float(np.sum(drawn * p))
    ratio = np.divide(p, q, out=np.zeros_like(p), where=q > 0)
    return float(np.sum(drawn * np.minimum(1.0, ratio)))


def _binomtest_p_values(n: int, rate: float) -> np.ndarray:
    """scipy.stats.binomtest's two-sided p-value for every count 0..n at once: the total
    probability of the counts no likelier than k (with binomtest's relative tolerance 1e-7)."""
    pmf = stats.binom.pmf(np.arange(n + 1), n, rate)
    order = np.sort(pmf)
    cumulative = np.cumsum(order)
    at_most = np.searchsorted(order, pmf * (1 + 1e-7), side="right")
    return np.minimum(1.0, np.where(at_most > 0, cumulative[np.maximum(at_most - 1, 0)], 0.0))


def _binomial_detectable(n: int, rate: float, level: float) -> float:
    """The smallest |shift| of the true rate that the exact two-sided test at `level` detects with
    probability POWER (the worse of the two directions); exact, from the test's rejection region."""
    if n == 0:
        return float("nan")
    counts = np.arange(n + 1)
    rejects = _binomtest_p_values(n, rate) <= level

    def power(true_rate: float) -> float:
        return float(stats.binom.pmf(counts[rejects], n, true_rate).sum())

    shifts = []
    for sign, limit in ((1.0, 1.0 - rate), (-1.0, rate)):
        if limit <= 0 or power(rate + sign * limit) < POWER:
            continue
        shifts.append(optimize.brentq(lambda d, sign=sign: power(rate + sign * d) - POWER, 1e-9, limit, xtol=1e-6))
    return float(max(shifts)) if len(shifts) == 2 else float(shifts[0]) if shifts else float("nan")


def _chi_square_detectable(n: int, categories: int, level: float) -> float:
    """Cohen's w that the chi-square test at `level` detects with probability POWER."""
    df = categories - 1
    critical = stats.chi2.isf(level, df)
    noncentrality = optimize.brentq(lambda lam: stats.ncx2.sf(critical, df, lam) - POWER, 1e-6, 1e5)
    return float(np.sqrt(noncentrality / n))


def extended_sequences(data: ChainInput, outcome: ChainOutcome, targets: np.ndarray, seed: int) -> np.ndarray:
    """(B, k+1) ids: each row's committed block, continued past its end by sampling the chain's target
    token by token (our seeded draws), as generation would continue."""
    rng = np.random.default_rng(seed)
    positions = data.draft_ids.shape[1] + 1
    sequences = outcome.emitted.copy()
    for position in range(positions):
        continued = outcome.accepted < position
        if continued.any():
            row = targets[0, position]
            drawn = rng.choice(row.size, size=int(continued.sum()), p=row / row.sum())
            sequences[continued, position] = drawn
    return sequences


MONTE_CARLO_CHUNK = 2_000
SEQUENTIAL_EXCEEDANCES = 20  # Besag-Clifford: stop once this many null draws reach the observed X^2


class _NullDraws:
    """X^2 of multinomial(n, p) null draws, made in chunks as a test needs them and kept for reuse
    (the power tool asks the same null thousands of times)."""

    def __init__(self, n: int, probabilities: np.ndarray, seed: int) -> None:
        self.n = n
        self.probabilities = probabilities
        self.rng = np.random.default_rng(seed)
        self.chunks: list[np.ndarray] = []

    def chunk(self, index: int) -> np.ndarray:
        expected = self.n * self.probabilities
        while len(self.chunks) <= index:
            samples = self.rng.multinomial(self.n, self.probabilities, size=MONTE_CARLO_CHUNK)
            self.chunks.append(np.sum((samples - expected) ** 2 / expected, axis=1))
        return self.chunks[index]


@functools.lru_cache(maxsize=512)
def _null(n: int, probabilities: bytes, seed: int) -> _NullDraws:
    return _NullDraws(n, np.frombuffer(probabilities, dtype=np.float64), seed)


def monte_carlo_x2(observed: np.ndarray, probabilities: np.ndarray, seed: int, draws: int = MONTE_CARLO_DRAWS) -> tuple[float, float]:
    """(Pearson X^2, its p-value) of counts against a fully specified multinomial, by Besag and Clifford's
    sequential Monte Carlo test (Biometrika 1991): null draws until SEQUENTIAL_EXCEEDANCES of them reach
    the observed X^2 (p = h / draws used), else all `draws` (p = (1 + b) / (draws + 1)).  Exact in level;
    a clear null stops after a few thousand draws, a small p-value uses them all."""
    n = int(observed.sum())
    probabilities = np.ascontiguousarray(probabilities, dtype=np.float64)
    expected = n * probabilities
    statistic = float(np.sum((observed - expected) ** 2 / expected))
    null = _null(n, probabilities.tobytes(), seed)
    threshold = statistic * (1 - 1e-12)
    exceedances = 0
    used = 0
    for index in range(-(-draws // MONTE_CARLO_CHUNK)):
        chunk = null.chunk(index)[: draws - used]
        hits = np.flatnonzero(chunk >= threshold)
        if exceedances + hits.size >= SEQUENTIAL_EXCEEDANCES:
            position = used + int(hits[SEQUENTIAL_EXCEEDANCES - exceedances - 1]) + 1
            return statistic, SEQUENTIAL_EXCEEDANCES / position
        exceedances += hits.size
        used += chunk.size
    return statistic, (1 + exceedances) / (draws + 1)


def monte_carlo_draws(family: int, alpha: float) -> int:
    """Null draws per X^2 test for a family of `family` tests at `alpha`: at least MONTE_CARLO_DRAWS, and
    enough that the smallest Monte Carlo p-value, 1/(draws+1), is MONTE_CARLO_MARGIN times below alpha /
    family (Holm's first level; a p-value that cannot go below it can never start Holm's rejections)."""
    return max(MONTE_CARLO_DRAWS, int(np.ceil(MONTE_CARLO_MARGIN * max(1, family) / alpha)))


def monte_carlo_resolution(draws: int, alpha: float, family: int) -> MonteCarloResolution:
    """What the family's X^2 tests can reach: the smallest p-value, and the largest family in which that
    p-value is still at or below Holm's first level alpha / family (above it no X^2 test can reject)."""
    smallest = 1.0 / (draws + 1)
    return MonteCarloResolution.written(draws=draws, smallest_p_value=smallest, family_size=family,
                                        largest_family_x2_can_reject=int(np.floor(alpha / smallest)),
                                        x2_can_reject=smallest <= alpha / max(1, family))


def _x2_test(scenario: str, test: str, position: int, ids: np.ndarray, probabilities: np.ndarray, support: np.ndarray,
             level: float, seed: int, draws: int = MONTE_CARLO_DRAWS) -> DistributionTest:
    """ids: (n,) category codes already mapped to support indices (-1 outside the support)."""
    n = int(ids.size)
    observed = np.bincount(ids[ids >= 0], minlength=support.size).astype(np.float64)
    expected = n * probabilities
    outside = int((ids < 0).sum())
    statistic = KernelTestStatistic.written(categories=int(support.size), outside_support=outside,
                                            min_expected=float(expected.min()) if n else 0.0)
    if test == "sequence-marginal" and (n == 0 or expected.min() < MIN_EXPECTED):
        return DistributionTest(scenario, test, position, n, None, statistic,
                                note=f"not tested: expected counts below {MIN_EXPECTED:g} with {n} rows")
    if outside:
        p_value, x2 = 0.0, float("inf")  # an id the target gives zero probability: impossible under p
    else:
        x2, p_value = monte_carlo_x2(observed, probabilities, seed, draws)
    statistic.update(x2=x2, monte_carlo_draws=draws, monte_carlo_seed=seed)
    return DistributionTest(scenario, test, position, n, float(p_value), statistic, _chi_square_detectable(n, int(support.size), level))


def sequence_tests(data: ChainInput, outcome: ChainOutcome, scenario: str, level: float, seed: int,
                   draws: int = MONTE_CARLO_DRAWS) -> list[DistributionTest]:
    """The marginal test at every position and the pair test at every adjacent pair, on the extended
    sequences."""
    targets = sampling_targets(data.rows(slice(0, 1)))
    sequences = extended_sequences(data, outcome, targets, seed)
    positions = sequences.shape[1]
    supports, codes, probabilities = [], [], []
    for position in range(positions):
        p = targets[0, position]
        support = np.flatnonzero(p > 0)
        lookup = np.full(p.size + 1, -1)
        lookup[support] = np.arange(support.size)
        ids = sequences[:, position]
        codes.append(lookup[np.where((ids >= 0) & (ids < p.size), ids, p.size)])
        supports.append(support)
        probabilities.append(p[support] / p[support].sum())
    tests = []
    for position in range(positions):
        test = _x2_test(scenario, "sequence-marginal", position, codes[position], probabilities[position], supports[position],
                        level, MONTE_CARLO_SEED + 10 * position, draws)
        test.statistic.put("from_sampler", int((outcome.accepted >= position).sum()))
        tests.append(test)
    for position in range(positions - 1):
        first, second = codes[position], codes[position + 1]
        width = supports[position + 1].size
        pair = np.where((first >= 0) & (second >= 0), first * width + second, -1)
        joint = np.outer(probabilities[position], probabilities[position + 1]).ravel()
        cells = np.arange(joint.size)
        test = _x2_test(scenario, "sequence-pair", position, pair, joint, cells, level, MONTE_CARLO_SEED + 10 * position + 5, draws)
        test.statistic.put("from_sampler", int((outcome.accepted >= position + 1).sum()))
        tests.append(test)
    return tests


def acceptance_tests(data: ChainInput, outcome: ChainOutcome, scenario: str, level: float) -> list[DistributionTest]:
    """Token verification's promise, step by step (not for block verification)."""
    targets = sampling_targets(data.rows(slice(0, 1)))[0]
    draft = data.draft_probs[0]
    tests: list[DistributionTest] = []
    for step in range(data.draft_ids.shape[1]):
        reached = outcome.accepted >= step
        n = int(reached.sum())
        successes = int((outcome.accepted[reached] > step).sum())
        rate = min(acceptance_rate(targets[step], draft[step], data.with_draft_probs), 1.0)
        if n == 0:
            tests.append(DistributionTest(scenario, "acceptance", step, 0, None, note="no row reached this step"))
            continue
        result = stats.binomtest(successes, n, rate)
        tests.append(DistributionTest(scenario, "acceptance", step, n, float(result.pvalue),
                                      KernelTestStatistic.written(accepted=successes, observed_rate=successes / n, expected_rate=rate),
                                      _binomial_detectable(n, rate, level)))
    return tests


def accepted_length_test(scenario: str, block: ChainOutcome, token: ChainOutcome, level: float) -> DistributionTest:
    """Block minus token verification's accepted drafts on the same rows and coins: the paired mean with
    a 95% t interval; p-value of the one-sided t test that the mean is below 0 (asymptotic: the differences
    are bounded integers, not normal)."""
    difference = (block.accepted - token.accepted).astype(np.float64)
    n = difference.size
    result = stats.ttest_1samp(difference, 0.0, alternative="less")
    spread = float(difference.std(ddof=1)) if n > 1 else float("nan")
    p_value = 1.0 if spread == 0 and difference.mean() >= 0 else float(result.pvalue)
    interval = stats.ttest_1samp(difference, 0.0).confidence_interval(0.95) if spread > 0 else None
    detectable = float((stats.norm.isf(level) + stats.norm.isf(1 - POWER)) * spread / np.sqrt(n)) if spread > 0 else 0.0
    return DistributionTest(scenario, "accepted-length", -1, n, p_value, KernelTestStatistic.written(
        block_mean_accepted=float(block.accepted.mean()), token_mean_accepted=float(token.accepted.mean()),
        mean_difference=float(difference.mean()),
        difference_ci95=None if interval is None else [float(interval.low), float(interval.high)],
        rows_block_longer=int((difference > 0).sum()), rows_token_longer=int((difference < 0).sum())), detectable)


def adjust(tests: list[DistributionTest], alpha: float) -> None:
    """Holm over every tested member of the family, in place."""
    tested = [t for t in tests if t.p_value is not None]
    if not tested:
        return
    adjusted = holm({t.name: t.p_value for t in tested}, alpha=alpha).by_name()
    for test in tested:
        test.adjusted_p, test.rejected = adjusted[test.name]


def family_size(steps: int, scenarios: int = len(SCENARIOS), block: bool = False, own_coins: bool = False) -> int:
    """Tests per session: per scenario k+1 marginal and k pair tests, plus k acceptance tests for token
    verification or one accepted-length test for block verification; plus the rule's total-length test
    for a sampler that draws its own coins."""
    per_scenario = (steps + 1) + steps + (1 if block else steps)
    return scenarios * per_scenario + (1 if own_coins else 0)


def kernel_family_size(kernel: LoadedKernel, steps: int) -> int:
    return family_size(steps, len(scenarios_for(kernel)), kernel.spec.block, rule_check.draws_own_coins(kernel))


def rule_family_test(kernel: LoadedKernel, shape: KernelShape, seed: int, level: float) -> DistributionTest:
    """The rule's total-length test (specsuite.kernels.rule_check.total_length_test) as a family member."""
    data, outcome = rule_check.run_rule(kernel, shape, seed)
    result = rule_check.total_length_test(data, outcome, kernel.spec.block)
    spread = float(np.sqrt(result.variance)) / data.batch
    detectable = float((stats.norm.isf(level / 2) + stats.norm.isf(1 - POWER)) * spread)
    # observed/expected_rate: accepted drafts per row, the columns the report's distribution table shows.
    # from_dict: the rule check's details (specsuite.kernels.rule_check) ride along after the named figures, in extra
    statistic = KernelTestStatistic.from_dict({
        "verification": result.verification, "observed_total": result.observed_total, "expected_total": result.expected_total,
        "observed_rate": result.mean_accepted, "expected_rate": result.expected_mean_accepted, **result.details})
    return DistributionTest(RULE_SCENARIO, "rule-total", -1, data.batch, result.p_value, statistic, detectable)


def run_family(kernel: LoadedKernel, shape: KernelShape, seed: int, rows: int, alpha: float,
               chain_seed: int | None = None) -> tuple[list[DistributionTest], dict[str, float]]:
    """Every scenario's tests for `kernel`, Holm-adjusted together, and the sampler seconds per scenario.
    Input seeds: seed * 1000 + 500 + the scenario's index among ALL_SCENARIOS (the chain's from
    chain_seed the same way, when given)."""
    block = kernel.spec.block
    scenarios = scenarios_for(kernel)
    members = kernel_family_size(kernel, shape.steps)
    level = alpha / max(1, members)
    draws = monte_carlo_draws(members, alpha)
    tests: list[DistributionTest] = []
    seconds: dict[str, float] = {}
    for scenario in scenarios:
        index = ALL_SCENARIOS.index(scenario)
        data = distribution_input(scenario, seed * 1000 + 500 + index, shape, scenario_rows(scenario, rows),
                                  None if chain_seed is None else chain_seed * 1000 + 500 + index)
        started = time.perf_counter()
        outcome = run_all_rows(kernel, data, shape.batch)
        if block:
            token = run_all_rows(kernel, data, shape.batch, block_verification=False)
            tests.append(accepted_length_test(scenario, outcome, token, level))
        else:
            tests += acceptance_tests(data, outcome, scenario, level)
        seconds[scenario] = time.perf_counter() - started
        tests += sequence_tests(data, outcome, scenario, level, seed * 1000 + 700 + index, draws)
    if rule_check.draws_own_coins(kernel):
        started = time.perf_counter()
        tests.append(rule_family_test(kernel, shape, seed, level))
        seconds[RULE_SCENARIO] = time.perf_counter() - started
    adjust(tests, alpha)
    return tests, seconds
