"""Distribution tests of a chain sampler on well-formed inputs (scipy.stats, exact where possible).

One fixed chain (a target p_j and a draft q_j per step, each on a few ids, so every category has
enough counts) is repeated over many rows, each row with its own drafts (drawn from q_j) and
coins.  Two families of tests, per draft step j:

- acceptance: among rows that reached step j, the number that accepted draft j is
  Binomial(n, a_j) with a_j = sum_x q(x) min(1, p(x)/q(x)), the rejection rule's promise
  (exact two-sided binomial test);
- emitted token: among rows that reached position j, the committed id at j (the accepted draft,
  the residual draw, or at j = k the bonus token) is distributed as p_j: the guarantee of
  speculative sampling (chi-square goodness of fit; any id outside p_j's support is an impossible
  event and gives p = 0).

Holm's correction runs over every test of the session's family.  Power is stated for each test as
the smallest deviation it detects with 90% probability at its Bonferroni level (alpha / family
size, which Holm's first step uses): for the binomial test exactly, from its rejection region; for
the chi-square test as Cohen's w, from the noncentral chi-square.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import optimize, stats

from harness.errors import SpecsuiteError
from harness.kernels.inputs import ChainInput, KernelShape, draw_ids
from harness.kernels.invoke import ChainOutcome, run_chain
from harness.kernels.loader import LoadedKernel
from harness.stats.multiplicity import holm

SUPPORT = 8  # ids per target row: 8 categories, each expected >= 5 times at the default rows
POWER = 0.9
MIN_EXPECTED = 5.0  # the chi-square approximation's usual floor per category
SCENARIOS = ("well-formed", "p-equals-q")
DEFAULT_ROWS = 1024
# p == q accepts every draft (its acceptance test is exact: one rejection fires it), so it needs
# fewer rows than the well-formed chain; its emitted-token tests get the power stated for them.
ROW_SHARE = {"well-formed": 1.0, "p-equals-q": 0.25}


def scenario_rows(scenario: str, rows: int) -> int:
    return max(1, int(round(rows * ROW_SHARE[scenario])))


@dataclass
class DistributionTest:
    """One exact binomial or chi-square test, before and after Holm's correction."""

    scenario: str
    test: str  # "acceptance" or "emitted"
    position: int  # draft step (acceptance) or committed position (emitted; k is the bonus token)
    n: int
    p_value: float | None  # None: not tested (too few rows), see `note`
    statistic: dict[str, Any] = field(default_factory=dict)
    detectable_at_90: float | None = None  # smallest rate shift (acceptance) or Cohen's w (emitted)
    adjusted_p: float | None = None
    rejected: bool = False
    note: str = ""

    @property
    def name(self) -> str:
        return f"{self.scenario}/{self.test}@{self.position}"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "scenario": self.scenario, "test": self.test, "position": self.position, "n": self.n,
                "p_value": self.p_value, "adjusted_p": self.adjusted_p, "rejected": self.rejected,
                "detectable_at_90_power": self.detectable_at_90, "note": self.note, **self.statistic}


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
            draft[step] = 0.7 * target[step] + 0.3 * noise
    return target.astype(np.float32), draft.astype(np.float32)


def distribution_input(scenario: str, seed: int, shape: KernelShape, rows: int) -> ChainInput:
    if scenario not in SCENARIOS:
        raise SpecsuiteError(f"unknown distribution scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
    if rows < 1:
        raise SpecsuiteError(f"--kernel-dist-rows must be at least 1, got {rows}")
    rng = np.random.default_rng(seed)
    target, draft = _chain_rows(rng, shape, scenario)
    targets = np.broadcast_to(target, (rows, *target.shape))
    drafts = np.broadcast_to(draft, (rows, *draft.shape))
    ids = draw_ids(rng, np.broadcast_to(draft.astype(np.float64), (rows, *draft.shape)))
    coins = rng.random((rows, shape.steps), dtype=np.float32)
    final = rng.random(rows, dtype=np.float32)
    return ChainInput(f"distribution:{scenario}", targets, drafts, ids, coins, final, shape.tokenizer_vocab, seed)


def run_in_batches(kernel: LoadedKernel, data: ChainInput, batch: int) -> ChainOutcome:
    """The kernel over all rows of `data`, `batch` rows per call."""
    parts = [run_chain(kernel, *data.rows(slice(start, start + batch)).arrays()) for start in range(0, data.batch, batch)]
    return ChainOutcome(np.concatenate([p.accepted for p in parts]), np.concatenate([p.emitted for p in parts]),
                        np.concatenate([p.final_ids for p in parts]))


def acceptance_rate(target_row: np.ndarray, draft_row: np.ndarray) -> float:
    """a = sum_x q~(x) min(1, p(x)/q(x)): X drawn from q~ (q renormalised, as the drafts were)."""
    p = target_row.astype(np.float64)
    q = draft_row.astype(np.float64)
    drawn = q / q.sum()
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


def distribution_tests(data: ChainInput, outcome: ChainOutcome, scenario: str, family_size: int, alpha: float) -> list[DistributionTest]:
    """Every acceptance and emitted-token test of one scenario (unadjusted)."""
    steps = data.draft_ids.shape[1]
    level = alpha / max(1, family_size)
    target, draft = data.target_probs[0], data.draft_probs[0]
    tests: list[DistributionTest] = []
    for step in range(steps):
        reached = outcome.accepted >= step
        n = int(reached.sum())
        successes = int((outcome.accepted[reached] > step).sum())
        rate = acceptance_rate(target[step], draft[step])
        if n == 0:
            tests.append(DistributionTest(scenario, "acceptance", step, 0, None, note="no row reached this step"))
            continue
        result = stats.binomtest(successes, n, min(rate, 1.0))
        tests.append(DistributionTest(scenario, "acceptance", step, n, float(result.pvalue),
                                      {"accepted": successes, "observed_rate": successes / n, "expected_rate": rate},
                                      _binomial_detectable(n, min(rate, 1.0), level)))
    for position in range(steps + 1):
        reached = outcome.accepted >= position
        ids = outcome.emitted[reached, position]
        n = int(ids.size)
        p = target[position].astype(np.float64)
        support = np.flatnonzero(p > 0)
        expected = n * p[support] / p[support].sum()
        observed = np.array([(ids == token).sum() for token in support])
        outside = int(n - observed.sum())
        statistic = {"categories": int(support.size), "outside_support": outside, "min_expected": float(expected.min()) if n else 0.0}
        if n == 0 or expected.min() < MIN_EXPECTED:
            tests.append(DistributionTest(scenario, "emitted", position, n, None, statistic,
                                          note=f"not tested: expected counts below {MIN_EXPECTED:g} with {n} rows"))
            continue
        if outside:
            p_value, chi2 = 0.0, float("inf")  # an id the target gives zero probability: impossible under p
        else:
            chi2, p_value = (float(v) for v in stats.chisquare(observed, expected))
        tests.append(DistributionTest(scenario, "emitted", position, n, float(p_value), {**statistic, "chi2": chi2},
                                      _chi_square_detectable(n, int(support.size), level)))
    return tests


def adjust(tests: list[DistributionTest], alpha: float) -> None:
    """Holm over every tested member of the family, in place."""
    tested = [t for t in tests if t.p_value is not None]
    if not tested:
        return
    adjusted = holm({t.name: t.p_value for t in tested}, alpha=alpha).by_name()
    for test in tested:
        test.adjusted_p, test.rejected = adjusted[test.name]


def family_size(steps: int, scenarios: int = len(SCENARIOS)) -> int:
    """Tests per session: k acceptance and k+1 emitted tests per scenario."""
    return scenarios * (2 * steps + 1)
