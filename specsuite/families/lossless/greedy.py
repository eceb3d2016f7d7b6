"""Greedy equality: at T=0 speculative decoding must reproduce the non-speculative output.

Each prompt's output from the server under test (at several concurrencies) is scored on the
reference, teacher-forced: the candidate's own ids are sent back as input and the reference
reports its logprobs at every position (`workloads.lossless.scoring`). Every position where the
candidate's token is not the reference's argmax is a flip, classified by how far the candidate's
token sits below the reference's top: "numerics" within the near-tie tolerance (a tie that batch
shape, kernels or prefill against decode can flip), else "real". So nothing after a first
divergence goes unjudged, and a server that takes the runner-up at every near tie is caught.

The test passes when there is no real flip and the near-tie flips are not too many
(`near_tie_excess`), by two exact one-sided tests, each at `alpha`:
- the noise model: the gap noise between two forwards is symmetric, Gaussian with sd half the
  tolerance (the tolerance is its two-sigma point), so a token g nats below the reference's top
  comes first on a correct server with probability at most Phi(-g / sd), and no more than
  (m-k)/m for m tokens within the tolerance, k tied at the top (`flip_bound`); the flip count is
  then at most Poisson-binomial with those probabilities, whose upper tail is computed exactly.
- the speculation-off control: the reference's own greedy outputs scored the same way (decode
  against prefill numerics on the same node); Fisher's exact test, flips per near-tie position.
The near-tie flips are too many only when both tests reject (an intersection-union test: its
false-alarm rate is at most alpha); without a control, the noise model alone decides.

The tolerance comes from the type the servers round logits in (`near_tie_rule`): a top-2 gap is
a difference of two logits, each rounded to the type's step at its magnitude, and a speculative
verify (several tokens in one forward) rounds differently from a one-token decode, as a batch of
8 does from a batch of 1. `ROUNDINGS` steps of the type at `LOGIT_MAGNITUDE` cover one rounding on
each side for logits below 32 (float16: 0.031 nats, bfloat16: 0.25; live H100 runs flipped ties
at 0.0078 nats in float16 and 0.0625 and 0.125 in bfloat16, logits in [8, 16)). float32 keeps the
suite's long-standing 1e-3 nats, above its own step: reduction order still differs between batch
shapes. An fp8 KV cache or fp8 weights do not round the logits (specsuite.server.served_dtype).
Where twice the control's own furthest flip (decode against prefill on this node) is further than
the tolerance, the tolerance widens to it, and the result says so. `--lossless-numerics-gap` overrides
the table.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

from specsuite.errors import SpecsuiteError
from specsuite.families.lossless.records import GreedyConcurrency, GreedyDivergence, NearTieRule
from specsuite.families.lossless.scoring import ScoredPosition
from specsuite.server.served_dtype import MANTISSA_BITS, UNKNOWN_FALLBACK, ServedDtype, coarser
from specsuite.stats.lazy_scipy import stats

DEFAULT_NUMERICS_GAP = 1e-3  # the float32 floor
LOGIT_MAGNITUDE = 16.0  # logits below 32: the type's step in [16, 32) is the largest they see
ROUNDINGS = 2  # verify and decode each round once
TOP_CANDIDATES = 5  # top logprobs a reference answer carries: a three-way tie can flip to the third
CONTROL_MARGIN = 2.0  # the tolerance covers twice the control's own furthest flip (tools/calibration/greedy_near_ties.py)
NEAR_TIE_ALPHA = 0.001  # each of the two near-tie count tests, per concurrency (the suite's per-test alpha)

DivergenceKind = Literal["numerics", "real"]


def dtype_step(dtype: str, magnitude: float = LOGIT_MAGNITUDE) -> float:
    """One step (ULP) of `dtype` at `magnitude`: 2**(exponent - mantissa bits)."""
    return 2.0 ** (math.floor(math.log2(magnitude)) - MANTISSA_BITS[dtype])


@dataclass(frozen=True)
class NearTie:
    """How far below the reference's top a token may be and still be a numerics flip, and why."""

    dtype: str | None  # None: the tolerance was given (--lossless-numerics-gap)
    tolerance: float
    source: str

    def describe(self) -> str:
        kind = f"{self.dtype} " if self.dtype else ""
        return f"{kind}tolerance {self.tolerance:.3g} nats ({self.source})"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def record(self) -> NearTieRule:
        return NearTieRule.written(**asdict(self))

    def widened(self, reach: float, why: str) -> NearTie:
        """This rule, or one that reaches `reach` nats when that is further (and says why)."""
        if reach <= self.tolerance:
            return self
        return NearTie(self.dtype, reach, f"{self.source}; widened to {reach:.3g} nats: {why}")


def near_tie_rule(dtype: str | None, source: str = "", override: float | None = None) -> NearTie:
    """The tolerance for logits computed in `dtype` (a key of MANTISSA_BITS; None: unknown), unless
    `override` (--lossless-numerics-gap) is given."""
    if override is not None:
        return NearTie(None, float(override), "--lossless-numerics-gap")
    if dtype is None:
        dtype, source = UNKNOWN_FALLBACK, source or "dtype unknown: assumed bfloat16"
    steps = ROUNDINGS * dtype_step(dtype)
    tolerance = max(steps, DEFAULT_NUMERICS_GAP)
    rule = f"{ROUNDINGS} {dtype} steps at |logit| {LOGIT_MAGNITUDE:g}" if steps >= DEFAULT_NUMERICS_GAP else (
        f"the floor {DEFAULT_NUMERICS_GAP:g} nats, above {ROUNDINGS} {dtype} steps: reduction order differs between batch shapes")
    return NearTie(dtype, tolerance, f"{source or dtype}; {rule}")


def near_tie_of(served: Sequence[ServedDtype], override: float | None = None) -> NearTie:
    """The rule for comparing servers of these types: the coarsest one's (each source named)."""
    if not served:
        return near_tie_rule(None, override=override)
    dtype = served[0].name
    for item in served[1:]:
        dtype = coarser(dtype, item.name)
    return near_tie_rule(dtype, "; ".join(dict.fromkeys(f"{s.name}: {s.source}" for s in served)), override)


def as_rule(tolerance: NearTie | float) -> NearTie:
    """A rule from a bare number (a tolerance given in nats) or the rule itself."""
    return tolerance if isinstance(tolerance, NearTie) else NearTie(None, float(tolerance), "given")


def top_entries(entries: Any) -> list[tuple[float, int]]:
    """(logprob, id) pairs, best first, from SGLang's per-position output_top_logprobs entry."""
    return [(float(t[0]), int(t[1])) for t in (entries or [])[:TOP_CANDIDATES]]


@dataclass(frozen=True)
class ReferenceOutput:
    """The reference's greedy output and, per position, its best tokens as (logprob, id) pairs, best
    first (at least two; up to TOP_CANDIDATES)."""

    output_ids: list[int]
    top: list[list[tuple[float, int]]]


@dataclass(frozen=True)
class Divergence:
    """One position where an output left the reference's argmax (or ended early), and its kind."""

    prompt_index: int
    position: int  # 1-based
    test_token: int | None  # None: the output ended here
    reference_token: int | None  # the reference's argmax there, given the candidate's own prefix
    top2_gap: float | None  # None when the reference has no top-2 there
    kind: DivergenceKind
    reason: str
    below_top: float | None = None  # how far the test token sits below the reference's top (nats)


def first_divergence(test: Sequence[int], reference: Sequence[int]) -> int | None:
    """0-based index of the first difference (a length difference counts), or None if equal."""
    for index, (a, b) in enumerate(zip(test, reference, strict=False)):
        if a != b:
            return index
    return None if len(test) == len(reference) else min(len(test), len(reference))


def classify(prompt_index: int, test: Sequence[int], reference: ReferenceOutput, tolerance: NearTie | float) -> Divergence | None:
    """The first divergence only, judged by the reference's own decode-time top logprobs there (None when equal):
    the integrity suite's prefix comparisons (specsuite.families.integrity.near_ties). Greedy equality judges every
    position instead (`judge_output`)."""
    rule = as_rule(tolerance)
    index = first_divergence(test, reference.output_ids)
    if index is None:
        return None
    test_token = test[index] if index < len(test) else None
    reference_token = reference.output_ids[index] if index < len(reference.output_ids) else None
    top = reference.top[index] if index < len(reference.top) else []
    gap = top[0][0] - top[1][0] if len(top) >= 2 else None
    below = next((top[0][0] - logprob for logprob, token in top if token == test_token), None)

    def divergence(kind: DivergenceKind, reason: str) -> Divergence:
        return Divergence(prompt_index, index + 1, test_token, reference_token, gap, kind, reason, below)

    if test_token is None or reference_token is None:
        return divergence("real", "one output ended early")
    if gap is None:
        return divergence("real", "the reference reported no top-2 here")
    if below is None:
        return divergence("real", f"not one of the reference's {len(top)} best tokens ({rule.describe()})")
    kind, reason = _kind(below, test_token == top[1][1], rule)
    return divergence(kind, reason)


def _kind(below: float, runner_up: bool, rule: NearTie) -> tuple[DivergenceKind, str]:
    """Numerics within the tolerance of the reference's top, else real, with the reason."""
    if below > rule.tolerance:
        what = "top-2 gap" if runner_up else "gap to this token"
        return "real", f"the reference's {what} {below:.3g} nats is not a near-tie: above the {rule.describe()}"
    return "numerics", f"near-tie: {below:.3g} nats below the reference's top, within the {rule.describe()}"


@dataclass(frozen=True)
class OutputJudgement:
    """One output scored on the reference: its flips, and how many of its positions were near ties."""

    divergences: list[Divergence]
    near_tie_positions: int  # positions with a token strictly below the reference's top and within the tolerance
    flip_bounds: list[float]  # per near-tie position, the noise model's bound of a flip there (flip_bound)

    @property
    def near_tie_flips(self) -> int:
        return sum(d.kind == "numerics" for d in self.divergences)


def judge_output(prompt_index: int, test: Sequence[int], scored: Sequence[ScoredPosition], reference: ReferenceOutput | None,
                 tolerance: NearTie | float) -> OutputJudgement:
    """Every position of `test` against the reference's teacher-forced logprobs there (`scored`, one per
    token). An output that is a strict prefix of the reference's ended early: real."""
    rule = as_rule(tolerance)
    if len(scored) != len(test):
        raise SpecsuiteError(f"greedy equality: {len(scored)} scored positions for an output of {len(test)} tokens")
    divergences, bounds = [], []
    for index, position in enumerate(scored):
        top = position.top_logprobs
        gap = top[0] - top[1] if len(top) >= 2 else None
        bound = flip_bound(top, rule.tolerance)
        if bound > 0.0:
            bounds.append(bound)
        below = _below_top(position)
        if position.token_id == position.top_ids[0] or (below is not None and below <= 0.0):
            continue  # the top, or exactly tied with it (which of equal tokens is listed first is the server's choice)
        if below is None:
            reason = f"not one of the reference's {len(top)} best tokens and no logprob of its own ({rule.describe()})"
            kind: DivergenceKind = "real"
        else:
            kind, reason = _kind(below, len(top) >= 2 and position.token_id == position.top_ids[1], rule)
        divergences.append(Divergence(prompt_index, index + 1, position.token_id, position.top_ids[0], gap, kind, reason, below))
    if reference is not None and len(test) < len(reference.output_ids) and list(test) == reference.output_ids[:len(test)]:
        divergences.append(Divergence(prompt_index, len(test) + 1, None, reference.output_ids[len(test)], None, "real",
                                      "one output ended early"))
    return OutputJudgement(divergences, len(bounds), bounds)


def flip_bound(top: Sequence[float], tolerance: float) -> float:
    """The noise model's bound of the chance that a correct server puts a token strictly below the reference's top
    first, at a position whose best logprobs are `top` (best first): the gap noise between two forwards is taken as
    Gaussian with sd tolerance / 2 (the tolerance is its two-sigma point), so a token g below flips with probability
    at most Phi(-g / sd), summed over the tokens within the tolerance; and never above (m - k) / m for m tokens within the
    tolerance, k of them tied at the top (symmetric noise: no token below the top wins more often than the top)."""
    below = [top[0] - value for value in top if 0.0 < top[0] - value <= tolerance]
    if not below:
        return 0.0
    within = sum(top[0] - value <= tolerance for value in top)
    tied = within - len(below)
    return min((within - tied) / within, float(stats.norm.sf(np.array(below) / (tolerance / 2)).sum()))


def _below_top(position: ScoredPosition) -> float | None:
    """How far the scored token sits below the reference's top: its own logprob, else its top-K entry."""
    if position.token_logprob is not None and math.isfinite(position.token_logprob):
        return position.top_logprobs[0] - position.token_logprob
    listed = [value for token, value in zip(position.top_ids, position.top_logprobs, strict=True) if token == position.token_id]
    return position.top_logprobs[0] - listed[0] if listed else None


def poisson_binomial_sf(observed: int, probabilities: Sequence[float]) -> float:
    """P(X >= observed) for X a sum of independent Bernoulli(p_i), computed exactly by convolution."""
    if observed <= 0:
        return 1.0
    pmf = np.zeros(len(probabilities) + 1)
    pmf[0] = 1.0
    for p in probabilities:
        pmf[1:] = pmf[1:] * (1 - p) + pmf[:-1] * p
        pmf[0] *= 1 - p
    return float(min(1.0, pmf[observed:].sum()))


@dataclass(frozen=True)
class NearTieCounts:
    """Near-tie flips and near-tie positions of one set of outputs (the candidate's or the control's)."""

    flips: int
    positions: int
    bounds: tuple[float, ...] = ()

    @classmethod
    def of(cls, judgements: Sequence[OutputJudgement]) -> NearTieCounts:
        return cls(sum(j.near_tie_flips for j in judgements), sum(j.near_tie_positions for j in judgements),
                   tuple(b for j in judgements for b in j.flip_bounds))


@dataclass(frozen=True)
class NearTieExcess:
    """The candidate's near-tie flips against the noise model and the speculation-off control."""

    flips: int
    positions: int
    model_bound: float  # the noise model's expected flips at most
    model_p: float
    control_flips: int | None
    control_positions: int | None
    control_p: float | None
    alpha: float

    @property
    def excess(self) -> bool:
        rejected = self.model_p < self.alpha
        return rejected and (self.control_p is None or self.control_p < self.alpha)

    def describe(self) -> str:
        text = (f"{self.flips} near-tie flips of {self.positions} near-tie positions; noise model (gap noise with sd half the "
                f"tolerance, a flip g below the top at most Phi(-g/sd), Poisson-binomial upper tail): at most {self.model_bound:.1f} expected, "
                f"p={self.model_p:.3g}")
        if self.control_p is not None:
            text += (f"; speculation-off control {self.control_flips} of {self.control_positions}, Fisher's exact "
                     f"one-sided p={self.control_p:.3g}")
        return text + f"; too many only when {'both tests reject' if self.control_p is not None else 'it rejects'} at alpha {self.alpha:g}"


def near_tie_excess(candidate: NearTieCounts, control: NearTieCounts | None, alpha: float = NEAR_TIE_ALPHA) -> NearTieExcess:
    """Whether the candidate flips near ties more often than numerics explain (module docstring)."""
    model_p = poisson_binomial_sf(candidate.flips, candidate.bounds)
    control_p = None
    if control is not None:
        table = [[candidate.flips, candidate.positions - candidate.flips], [control.flips, control.positions - control.flips]]
        control_p = 1.0 if candidate.flips == 0 else float(stats.fisher_exact(table, alternative="greater").pvalue)
    return NearTieExcess(candidate.flips, candidate.positions, float(sum(candidate.bounds)), model_p,
                         None if control is None else control.flips, None if control is None else control.positions, control_p, alpha)


def control_rule(rule: NearTie, control: Sequence[OutputJudgement]) -> NearTie:
    """The rule widened to CONTROL_MARGIN times the speculation-off control's own furthest flip (decode against prefill
    on this node): the candidate's furthest flip is as likely as not to pass the control's at equal noise, and every
    position is judged, so the tolerance needs headroom over the node's own reach."""
    reach = max((d.below_top or 0.0 for j in control for d in j.divergences), default=0.0)
    return rule.widened(CONTROL_MARGIN * reach, f"{CONTROL_MARGIN:g} x {reach:.3g} nats, the furthest the speculation-off "
                                                "control's own outputs flip, scored against themselves")


@dataclass
class GreedyResult:
    """Greedy equality at one concurrency."""

    concurrency: int
    prompts: int
    equal: int
    near_tie: NearTie
    divergences: list[Divergence] = field(default_factory=list)
    near_ties: NearTieExcess | None = None

    @property
    def real(self) -> int:
        return sum(d.kind == "real" for d in self.divergences)

    @property
    def numerics(self) -> int:
        return sum(d.kind == "numerics" for d in self.divergences)

    @property
    def passed(self) -> bool:
        return self.real == 0 and not (self.near_ties is not None and self.near_ties.excess)

    def record(self) -> GreedyConcurrency:
        """The result as results.json records it."""
        excess = self.near_ties
        return GreedyConcurrency.written(
            concurrency=self.concurrency, prompts=self.prompts, equal=self.equal, numerics=self.numerics, real=self.real,
            passed=self.passed, numerics_gap=self.near_tie.tolerance, near_tie=self.near_tie.record(),
            divergences=[GreedyDivergence.written(**asdict(d)) for d in self.divergences],
            near_tie_test=excess.describe() if excess else None, near_tie_excess=excess.excess if excess else None)


def compare_greedy(concurrency: int, test_outputs: Sequence[Sequence[int]], references: Sequence[ReferenceOutput],
                   scored: Sequence[Sequence[ScoredPosition]], tolerance: NearTie | float = DEFAULT_NUMERICS_GAP,
                   control: NearTieCounts | None = None, alpha: float = NEAR_TIE_ALPHA) -> GreedyResult:
    """Judge every prompt's output (`scored`: its teacher-forced positions on the reference, one list per
    output) in prompt order; `tolerance`: the near-tie rule, or a bare tolerance in nats; `control`: the
    speculation-off control's near-tie counts."""
    rule = as_rule(tolerance)
    if len(test_outputs) != len(references) or len(scored) != len(test_outputs):
        raise SpecsuiteError(f"greedy equality: {len(test_outputs)} outputs against {len(references)} reference outputs")
    result = GreedyResult(concurrency, len(references), 0, rule)
    judgements = []
    for index, (test, reference) in enumerate(zip(test_outputs, references, strict=True)):
        if first_divergence(test, reference.output_ids) is None:
            result.equal += 1
        judgement = judge_output(index, test, scored[index], reference, rule)
        judgements.append(judgement)
        result.divergences.extend(judgement.divergences)
    result.near_ties = near_tie_excess(NearTieCounts.of(judgements), control, alpha)
    return result

