"""The verification rule itself, row by row: what a chain sampler must commit, given p, q, the drafts and
the coins, against what it committed.

Token verification (Leviathan et al., "Fast Inference from Transformers via Speculative Decoding"): draft
i (1-based) is accepted when its coin u_i < a_i = min(1, p_i(X_i)/q_i(X_i)), the row stops at the first
rejection, tau = the drafts accepted before it; the final token is drawn from (p_{tau+1} - q_{tau+1})+, or
from p_{k+1} at the bonus position (tau = k).

Block verification (Sun et al., "Block Verification Accelerates Speculative Decoding", Algorithm 2):
prefix weights P_0 = 1, P_i = min(1, P_{i-1} p_i(X_i)/q_i(X_i)); stop weights
h_i = R_i / (R_i + 1 - P_i) with R_i = sum_x (P_i p_{i+1}(x) - q_{i+1}(x))+ for i < k, and h_k = P_k;
tau = the largest i with u_i < h_i (0 if none); the final token is drawn from (P_tau p_{tau+1} - q_{tau+1})+,
or from p_{k+1} at the bonus position.  (Here p_i, q_i are the distributions draft i was drawn for, the
kernel's target and draft rows i - 1, and p_{k+1} the bonus row; the paper writes them as the next-token
distributions after X^{i-1}.)

Both rules are deterministic given the coins: where the sampler takes the coins as input (SGLang's
kernel: u_i is uniform_samples[:, i - 1], reject_sampling.py:78 for block and :146 for token verification
in the 0.5.23 wheel; the final draw is the inverse CDF at uniform_samples_for_final_sampling,
:203-234), every row's accepted count and committed tokens are checked exactly, and one wrong row fails
the check.  The kernel computes in float32, this module in float64 from the same float32 inputs: a row
whose coin lies within a bound on float32 rounding of a threshold, or whose final coin lies that close to
a CDF boundary between the two answers, is a tie (counted, not judged).  No statistics, so no false
alarm beyond a wrong bound, and any acceptance bias that moves one row's outcome is caught.

Where the sampler draws its own coins (vLLM's rejection sampler), each row's accepted count has a known
distribution given its drafts (token: P(tau >= i) = a_1 ... a_i; block: P(tau = i) = h_i prod_{j>i}
(1 - h_j)); the rows' total accepted count is compared with the exact distribution of that sum (a
convolution of the rows' distributions), by the exact two-sided test (twice the smaller tail).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from specsuite.kernels import engines
from specsuite.kernels.inputs import ChainInput, KernelShape, sampling_targets
from specsuite.kernels.invoke import ChainOutcome, run_all_rows
from specsuite.kernels.loader import LoadedKernel

EPS = 2.0**-24  # float32's unit roundoff
RULE_ROWS = 256  # rows of the rule input: 4 calls of the default batch, about 7-14 s under the interpreter
RULE_ROWS_OWN_COINS = 1024  # a statistical test needs more: a 1.25x token accept bias then gives p < 1e-6
RULE_SUPPORT = 8  # ids per target row
RULE_TILT = 0.6  # spread of log(q/p) on p's ids
RULE_SEED_OFFSET = 900  # the rule input's seed: seed * 1000 + this (the distribution scenarios use 500..)


def _distinct_ids(rng: np.random.Generator, below: int, size: int) -> np.ndarray:
    """`size` distinct ids in [0, below), in random order (rng.choice without replacement costs O(below))."""
    while True:
        drawn = rng.integers(0, below, size=2 * size)
        _, first = np.unique(drawn, return_index=True)
        if first.size >= size:
            return drawn[np.sort(first)[:size]]


def rule_input(seed: int, shape: KernelShape, rows: int = RULE_ROWS) -> ChainInput:
    """Rows of well-formed chains, each row its own: p_i on RULE_SUPPORT ids; q_i = 0.95 * (p_i reweighted by
    exp(RULE_TILT z), z standard normal per id) + 0.05 spread over RULE_SUPPORT // 2 other ids.  Drafted tokens then
    have p/q mostly in 0.6-1.5 (median near 0.9), so the prefix weights fall gradually and the stop
    weights spread over (0, 1): an acceptance threshold scaled by any factor moves many rows' outcome."""
    rng = np.random.default_rng(seed)
    steps, vocab, tokenizer = shape.steps, shape.kernel_vocab, shape.tokenizer_vocab
    target = np.zeros((rows, steps + 1, vocab), dtype=np.float32)  # float32 throughout: only 12 ids per row are set
    draft = np.zeros((rows, steps, vocab), dtype=np.float32)
    drafted = np.empty((rows, steps), dtype=np.int64)
    for row in range(rows):
        for step in range(steps + 1):
            ids = _distinct_ids(rng, tokenizer - 1, RULE_SUPPORT + RULE_SUPPORT // 2)  # vocab-1 stays out (the fallback id)
            inside, outside = ids[:RULE_SUPPORT], ids[RULE_SUPPORT:]
            weights = rng.dirichlet(np.full(RULE_SUPPORT, 4.0)) + 0.02
            weights /= weights.sum()
            target[row, step, inside] = weights
            if step == steps:
                continue
            tilted = weights * np.exp(RULE_TILT * rng.standard_normal(RULE_SUPPORT))
            draft[row, step, inside] = 0.95 * tilted / tilted.sum()
            draft[row, step, outside] = 0.05 / outside.size
            stored = np.cumsum(draft[row, step, ids].astype(np.float64))  # X drawn from q as the sampler reads it
            drafted[row, step] = ids[min(int(np.searchsorted(stored, rng.random() * stored[-1], side="right")), ids.size - 1)]
    coins = rng.random((rows, steps), dtype=np.float32)
    final = rng.random(rows, dtype=np.float32)
    return ChainInput("rule", target, draft, drafted, coins, final, tokenizer, seed)


@dataclass(frozen=True)
class Thresholds:
    """Per row and draft (B, k), the accept (token) or stop (block) threshold that coin u_i is compared
    with, bracketed by float32 rounding: the sampler may use any value in [low, high]; and the prefix
    weights P_0..P_k (B, k+1), 1 throughout for token verification, with their relative rounding bound."""

    value: np.ndarray
    low: np.ndarray
    high: np.ndarray
    prefix: np.ndarray
    prefix_tolerance: float
    name: str = "min(1, p/q)"  # how an example row names them


def _drafted(rows: np.ndarray, ids: np.ndarray) -> np.ndarray:
    return np.take_along_axis(rows[:, : ids.shape[1]], ids[:, :, None], axis=2)[:, :, 0].astype(np.float64)


def _guarded(q: np.ndarray) -> np.ndarray:
    """q where it is a probability of a drawable token, (0, 1]; else 0 (a draft that cannot be accepted)."""
    with np.errstate(invalid="ignore"):
        return np.where((q > 0.0) & (q <= 1.0), q, 0.0)


def token_thresholds(target: np.ndarray, draft: np.ndarray, ids: np.ndarray) -> Thresholds:
    """a_i = min(1, p_i(X_i) / q_i(X_i)) (0 where q_i(X_i) is not in (0, 1])."""
    p = _drafted(target, ids)
    q = _guarded(_drafted(draft, ids))
    ratio = np.minimum(np.divide(p, q, out=np.zeros_like(p), where=q > 0), 1.0)
    tolerance = 4 * EPS  # coin * q < p in float32: two roundings
    prefix = np.ones((ids.shape[0], ids.shape[1] + 1))
    return Thresholds(ratio, ratio * (1 - tolerance), np.minimum(ratio * (1 + tolerance), 1.0), prefix, 0.0)


def block_thresholds(target: np.ndarray, draft: np.ndarray, ids: np.ndarray) -> Thresholds:
    """h_1..h_k of Sun et al.'s Algorithm 2, with the float32 bracket: P_i carries at most 3 roundings per
    step; R_i is a float32 sum of V terms each rounded twice (bound EPS * (V R + 4 (P + 1)), any order of
    summation) plus P_i's own error; h is increasing in both R and P, so the bracket is h at the low and at
    the high corner, widened by h's own 4 roundings."""
    batch, steps = ids.shape
    vocab = target.shape[-1]
    p = _drafted(target, ids)
    q = _guarded(_drafted(draft, ids))
    ratio = np.divide(p, q, out=np.zeros_like(p), where=q > 0)
    prefix = np.ones((batch, steps + 1))
    for step in range(steps):
        prefix[:, step + 1] = np.minimum(prefix[:, step] * ratio[:, step], 1.0)
    prefix_tolerance = 3 * (steps + 1) * EPS
    value = np.empty((batch, steps))
    low = np.empty((batch, steps))
    high = np.empty((batch, steps))
    for i in range(1, steps + 1):
        weight = prefix[:, i]
        weight_low = weight * (1 - prefix_tolerance)
        weight_high = np.minimum(weight * (1 + prefix_tolerance), 1.0)
        if i == steps:
            value[:, i - 1], low[:, i - 1], high[:, i - 1] = weight, weight_low, weight_high
            continue
        next_q = _guarded(draft[:, i].astype(np.float64))
        mass = np.maximum(weight[:, None] * target[:, i].astype(np.float64) - next_q, 0.0).sum(axis=-1)
        mass_error = EPS * (vocab * mass + 4 * (weight + 1)) + prefix_tolerance * weight
        value[:, i - 1] = _stop_weight(mass, weight)
        low[:, i - 1] = _stop_weight(np.maximum(mass - mass_error, 0.0), weight_low) * (1 - 4 * EPS)
        high[:, i - 1] = np.minimum(_stop_weight(mass + mass_error, weight_high) * (1 + 4 * EPS), 1.0)
    return Thresholds(value, low, high, prefix, prefix_tolerance, "stop weights h")


def _stop_weight(mass: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """R / (R + 1 - P); 1 where the denominator is 0 (P = 1 and R = 0 cannot reject the prefix)."""
    denominator = mass + 1.0 - weight
    return np.divide(mass, denominator, out=np.ones_like(mass), where=denominator > 0)


def accepted_under(thresholds: np.ndarray, coins: np.ndarray, block: bool) -> np.ndarray:
    """tau per row for given thresholds (B, k) and coins (B, k): token, the leading run of u_i < a_i; block,
    the largest i with u_i < h_i.  Both only grow when the thresholds grow."""
    passed = coins < thresholds
    steps = passed.shape[1]
    if block:
        last = steps - np.argmax(passed[:, ::-1], axis=1)
        return np.where(passed.any(axis=1), last, 0).astype(np.int64)
    return np.where(passed.all(axis=1), steps, np.argmin(passed, axis=1)).astype(np.int64)


def _targets(data: ChainInput) -> np.ndarray:
    """The rows each position is sampled from: the float32 inputs themselves (cast where used), or after the
    rows' temperature and top-p for a logit-taking engine."""
    return data.target_probs if data.temperature is None and data.top_p is None else sampling_targets(data)


def thresholds_for(data: ChainInput, block: bool) -> Thresholds:
    return (block_thresholds if block else token_thresholds)(_targets(data), data.draft_probs, data.draft_ids)


def _residual(data: ChainInput, targets: np.ndarray, row: int, accepted: int, weight: float) -> np.ndarray:
    """The row the final token is drawn from: (P_tau p - q)+ at the stop, p at the bonus position."""
    p = targets[row, accepted].astype(np.float64)
    if accepted == data.draft_ids.shape[1]:
        return p
    q = data.draft_probs[row, accepted].astype(np.float64)
    with np.errstate(invalid="ignore"):
        q = np.where((q >= 0.0) & (q <= 1.0), q, 0.0)
    return np.maximum(weight * p - q, 0.0)


@dataclass
class RuleCheck:
    """The exact check of one input: rows whose outcome the coins fix, against the rule."""

    verification: str  # "token" or "block"
    rows: int
    expected_mean: float  # mean accepted drafts the rule gives (float64 thresholds)
    observed_mean: float
    wrong_length: int = 0  # rows whose accepted count is outside what the coins allow
    longer: int = 0  # of those, rows that accepted more than the rule
    wrong_drafts: int = 0  # rows whose committed drafts are not the drafted ids
    wrong_final: int = 0  # rows whose final token is not the inverse-CDF draw, beyond rounding
    length_ties: int = 0  # rows with a coin within rounding of a threshold that decides tau
    final_ties: int = 0  # rows with the final coin within rounding of a CDF boundary between the two answers
    example: dict[str, Any] | None = None

    @property
    def failures(self) -> int:
        return self.wrong_length + self.wrong_drafts + self.wrong_final

    @property
    def passed(self) -> bool:
        return self.failures == 0

    def message(self) -> str:
        head = (f"{self.verification} verification rule on {self.rows} rows: {self.wrong_length} with the wrong accepted count "
                f"({self.longer} longer than the rule), {self.wrong_drafts} with wrong committed drafts, {self.wrong_final} with the "
                f"wrong final token; mean accepted {self.observed_mean:.3f} vs the rule's {self.expected_mean:.3f} "
                f"(ratio {self.observed_mean / self.expected_mean if self.expected_mean else float('nan'):.3f}); "
                f"{self.length_ties} length and {self.final_ties} final-token rounding ties not judged")
        if self.example:
            head += "; e.g. " + ", ".join(f"{key} {value}" for key, value in self.example.items())
        return head

    def to_dict(self) -> dict[str, Any]:
        return {"mode": "exact", "verification": self.verification, "rows": self.rows, "passed": self.passed,
                "expected_mean_accepted": self.expected_mean, "observed_mean_accepted": self.observed_mean,
                "wrong_length": self.wrong_length, "longer_than_rule": self.longer, "wrong_drafts": self.wrong_drafts,
                "wrong_final": self.wrong_final, "length_ties": self.length_ties, "final_ties": self.final_ties,
                "example": self.example}


def _example(data: ChainInput, outcome: ChainOutcome, thresholds: Thresholds, row: int, expected: int, why: str) -> dict[str, Any]:
    steps = data.draft_ids.shape[1]
    ids = data.draft_ids[row]
    positions = np.arange(steps)
    return {"row": row, "why": why, "seed": data.seed, "expected_accepted": expected, "accepted": int(outcome.accepted[row]),
            "emitted": [int(v) for v in outcome.emitted[row, : int(outcome.accepted[row]) + 1]],
            "drafts": [int(v) for v in ids],
            "p(X)": [round(float(v), 6) for v in data.target_probs[row, positions, ids]],
            "q(X)": [round(float(v), 6) for v in data.draft_probs[row, positions, ids]],
            "coins": [round(float(v), 6) for v in data.accept_coins[row]],
            thresholds.name: [round(float(v), 6) for v in thresholds.value[row]], "final_coin": round(float(data.final_coins[row]), 6)}


def check_rule(data: ChainInput, outcome: ChainOutcome, block: bool) -> RuleCheck:
    """Every row against the rule at its own coins (see the module docstring)."""
    steps = data.draft_ids.shape[1]
    vocab = data.kernel_vocab
    thresholds = thresholds_for(data, block)
    coins = data.accept_coins.astype(np.float64)
    expected = accepted_under(thresholds.value, coins, block)
    low = accepted_under(thresholds.low, coins, block)
    high = accepted_under(thresholds.high, coins, block)
    accepted = outcome.accepted
    result = RuleCheck("block" if block else "token", data.batch, float(expected.mean()), float(accepted.mean()))
    result.length_ties = int((low != high).sum())
    wrong_length = (accepted < low) | (accepted > high)
    result.wrong_length = int(wrong_length.sum())
    result.longer = int((accepted > high).sum())
    targets = _targets(data)
    for row in range(data.batch):
        tau = int(accepted[row])
        if wrong_length[row]:
            if result.example is None:
                result.example = _example(data, outcome, thresholds, row, int(expected[row]), "accepted count")
            continue
        if outcome.emitted[row, :tau].tolist() != data.draft_ids[row, :tau].tolist():
            result.wrong_drafts += 1
            if result.example is None:
                result.example = _example(data, outcome, thresholds, row, int(expected[row]), "committed drafts")
            continue
        weight = float(thresholds.prefix[row, tau]) if tau < steps else 1.0
        residual = _residual(data, targets, row, tau, weight)
        cdf = np.cumsum(residual)
        norm = float(cdf[-1])
        target_u = float(data.final_coins[row]) * norm
        drawn = min(int(np.searchsorted(cdf, target_u, side="right")), vocab - 1)
        got = int(outcome.final_ids[row])
        if got == drawn:
            continue
        # Float32 error of the sampler's CDF and normaliser at this row (as for R above), doubled: u moves with the norm.
        tolerance = 2 * (EPS * (vocab * norm + 4 * (weight + 1)) + thresholds.prefix_tolerance * weight)
        lo, hi = sorted((drawn, min(max(got, 0), vocab - 1)))
        boundaries = list(cdf[lo:hi]) + ([norm] if got == vocab - 1 else [])
        if 0 <= got < vocab and boundaries and float(np.min(np.abs(np.array(boundaries) - target_u))) <= tolerance:
            result.final_ties += 1
            continue
        result.wrong_final += 1
        if result.example is None:
            result.example = {**_example(data, outcome, thresholds, row, int(expected[row]), "final token"),
                              "expected_final": drawn, "final": got}
    return result


@dataclass
class RuleLengthTest:
    """The statistical check, for a sampler that draws its own coins: the rows' total accepted count
    against its exact distribution given the drafts."""

    verification: str
    rows: int
    observed_total: int
    expected_total: float
    p_value: float
    mean_accepted: float  # accepted drafts per row, observed
    expected_mean_accepted: float  # and expected
    variance: float  # of the total under the null

    @property
    def details(self) -> dict[str, Any]:
        """The test's per-row figures, as the written statistic carries them after its named ones."""
        return {"mean_accepted": self.mean_accepted, "expected_mean_accepted": self.expected_mean_accepted, "variance": self.variance}

    def to_dict(self) -> dict[str, Any]:
        return {"mode": "statistical", "verification": self.verification, "rows": self.rows, "observed_total": self.observed_total,
                "expected_total": self.expected_total, "p_value": self.p_value, **self.details}


def length_distributions(thresholds: np.ndarray, block: bool) -> np.ndarray:
    """(B, k+1): P(tau = i) per row when u_1..u_k are independent uniforms."""
    batch, steps = thresholds.shape
    out = np.zeros((batch, steps + 1))
    if block:
        # tau = i: u_i < h_i and u_j >= h_j for every j > i.
        survive = np.ones(batch)
        for i in range(steps, 0, -1):
            out[:, i] = thresholds[:, i - 1] * survive
            survive = survive * (1.0 - thresholds[:, i - 1])
        out[:, 0] = survive
        return out
    reach = np.ones(batch)
    for i in range(steps):
        out[:, i] = reach * (1.0 - thresholds[:, i])
        reach = reach * thresholds[:, i]
    out[:, steps] = reach
    return out


def total_length_test(data: ChainInput, outcome: ChainOutcome, block: bool) -> RuleLengthTest:
    """Exact two-sided test of sum tau: its null distribution is the convolution of the rows' own."""
    distributions = length_distributions(thresholds_for(data, block).value, block)
    total = np.ones(1)
    for row in distributions:
        total = np.convolve(total, row)
    observed = int(outcome.accepted.sum())
    lower = float(total[: observed + 1].sum())
    upper = float(total[observed:].sum())
    counts = np.arange(distributions.shape[1])
    means = distributions @ counts
    expected = float(means.sum())
    variance = float((distributions @ counts**2 - means**2).sum())
    p_value = min(1.0, 2.0 * min(lower, upper))
    return RuleLengthTest("block" if block else "token", data.batch, observed, expected, p_value,
                          mean_accepted=observed / data.batch, expected_mean_accepted=expected / data.batch, variance=variance)


def draws_own_coins(kernel: LoadedKernel) -> bool:
    """Whether the kernel's engine draws its coins itself (vLLM's sampler, from its own seeded generators) rather than
    taking them as input (SGLang's kernel and the numpy samplers behind its signature)."""
    return engines.of(kernel).draws_own_coins


def rule_seed(seed: int) -> int:
    return seed * 1000 + RULE_SEED_OFFSET


def run_rule(kernel: LoadedKernel, shape: KernelShape, seed: int, rows: int | None = None) -> tuple[ChainInput, ChainOutcome]:
    """The rule input for the session's seed through `kernel`, shape.batch rows per call (one call for an engine that
    takes a whole input); RULE_ROWS rows, RULE_ROWS_OWN_COINS for a sampler with its own coins, unless `rows` says."""
    data = rule_input(rule_seed(seed), shape, rows if rows is not None else RULE_ROWS_OWN_COINS if draws_own_coins(kernel) else RULE_ROWS)
    return data, run_all_rows(kernel, data, shape.batch)


def rule_check_for(kernel: LoadedKernel, shape: KernelShape, seed: int, rows: int | None = None) -> RuleCheck:
    """The exact check of a sampler that takes the coins (not for draws_own_coins samplers)."""
    data, outcome = run_rule(kernel, shape, seed, rows)
    return check_rule(data, outcome, kernel.spec.block)
