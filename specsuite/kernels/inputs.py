"""Inputs for one verify step of the chain sampler: well-formed rows and corrupted draft_probs
(the -inf mask of a recycled CUDA-graph pool block, and other malformed q).

Every class is built from a fixed seed, so a failure names a row that can be rebuilt.  The shapes
follow a real model: the target p is a nucleus (top-p applied: zero outside a few hundred ids, and
zero on the padded rows [tokenizer_vocab, kernel_vocab), as an untrained padded row after masking
gives), the draft q is a full softmax (positive everywhere, a tiny mass on the padded rows, since
nothing masks the draft head's untrained rows).  Drafts are drawn from q.

Corruptions sit on one fixed draft step, `CORRUPT_STEP` (0-based index into draft_probs), as a recycled
pool block's do (the pool's allocation order is fixed at capture); the steps before it have q == p, so their
drafts are always accepted and every row reaches the corrupted step.  Coins are uniform float32 in [0, 1), like torch.rand's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from specsuite.errors import SpecsuiteError

CORRUPT_STEP = 2  # a recycled pool block's -inf runs land on the same draft step every time
PAGE_SIZE = 64  # the mask's -inf runs end on 64-aligned columns (page_size = 64)
DEFAULT_STEPS = 5
DEFAULT_VOCAB = 8128
DEFAULT_BATCH = 64
PADDED_ROW_DRAFT_MASS = 1e-6  # the draft's total probability on untrained padded rows


@dataclass(frozen=True)
class KernelShape:
    """The shapes of one verify call: rows, draft steps, the kernel's vocab (embedding rows) and the
    tokenizer's length (ids at or above it are padded rows)."""

    batch: int = DEFAULT_BATCH
    steps: int = DEFAULT_STEPS
    kernel_vocab: int = DEFAULT_VOCAB
    tokenizer_vocab: int = DEFAULT_VOCAB

    def __post_init__(self) -> None:
        if not 1 <= self.batch <= 4096:
            raise SpecsuiteError(f"--kernel-batch must be between 1 and 4096, got {self.batch}")
        if not CORRUPT_STEP < self.steps <= 16:
            raise SpecsuiteError(f"--kernel-steps must be between {CORRUPT_STEP + 1} and 16 (corruptions sit on draft step {CORRUPT_STEP}), got {self.steps}")
        if self.kernel_vocab < 4 * PAGE_SIZE:
            raise SpecsuiteError(f"--kernel-vocab must be at least {4 * PAGE_SIZE}, got {self.kernel_vocab}")
        if not 2 * PAGE_SIZE <= self.tokenizer_vocab <= self.kernel_vocab:
            raise SpecsuiteError(f"--tokenizer-vocab must lie in [{2 * PAGE_SIZE}, --kernel-vocab={self.kernel_vocab}], got {self.tokenizer_vocab}")

    def to_dict(self) -> dict[str, int]:
        return {"batch": self.batch, "steps": self.steps, "kernel_vocab": self.kernel_vocab, "tokenizer_vocab": self.tokenizer_vocab}


@dataclass(frozen=True)
class ChainInput:
    """One class's verify call: the kernel's inputs, as the sampler reads them."""

    input_class: str
    target_probs: np.ndarray  # (B, k+1, V) float32
    draft_probs: np.ndarray  # (B, k, V) float32, possibly corrupted
    draft_ids: np.ndarray  # (B, k) int64
    accept_coins: np.ndarray  # (B, k) float32
    final_coins: np.ndarray  # (B,) float32
    tokenizer_vocab: int
    seed: int
    # Sampling parameters of engines that take logits (vLLM); None: the target rows are sampled as given.
    temperature: np.ndarray | None = None  # (B,) float32, 0 = greedy
    top_p: np.ndarray | None = None  # (B,) float32
    with_draft_probs: bool = True  # False: the sampler is not shown q (an n-gram drafter's case)

    @property
    def batch(self) -> int:
        return int(self.draft_ids.shape[0])

    @property
    def kernel_vocab(self) -> int:
        return int(self.target_probs.shape[-1])

    def rows(self, index: np.ndarray | slice) -> ChainInput:
        """The same input restricted to some rows (a smaller batch with the same coins)."""
        return replace(self, target_probs=self.target_probs[index], draft_probs=self.draft_probs[index],
                       draft_ids=self.draft_ids[index], accept_coins=self.accept_coins[index], final_coins=self.final_coins[index],
                       temperature=None if self.temperature is None else self.temperature[index],
                       top_p=None if self.top_p is None else self.top_p[index])

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The positional arguments of `run_chain` after the kernel."""
        return self.target_probs, self.draft_probs, self.draft_ids, self.accept_coins, self.final_coins


def nucleus_rows(rng: np.random.Generator, count: int, tokenizer_vocab: int, kernel_vocab: int,
                 support: tuple[int, int] = (16, 256)) -> np.ndarray:
    """(count, V) float64 target rows: a random nucleus of 16..256 ids inside the tokenizer, with a
    long-tailed shape; zero elsewhere and on the padded rows."""
    rows = np.zeros((count, kernel_vocab))
    for row in rows:
        size = int(rng.integers(support[0], support[1] + 1))
        ids = rng.choice(tokenizer_vocab - 1, size=size, replace=False)  # vocab-1 stays out: its emission must mean the fallback
        row[ids] = rng.gamma(0.6, size=size) + 1e-3
    return rows / rows.sum(axis=1, keepdims=True)


def softmax_rows(rng: np.random.Generator, count: int, tokenizer_vocab: int, kernel_vocab: int) -> np.ndarray:
    """(count, V) float64 draft-like rows: positive everywhere, a little mass on the padded rows."""
    logits = rng.standard_normal((count, kernel_vocab)) * 2.5
    rows = np.exp(logits - logits.max(axis=1, keepdims=True))
    rows[:, :tokenizer_vocab] /= rows[:, :tokenizer_vocab].sum(axis=1, keepdims=True)
    padded = kernel_vocab - tokenizer_vocab
    if padded:
        rows[:, tokenizer_vocab:] *= PADDED_ROW_DRAFT_MASS / rows[:, tokenizer_vocab:].sum(axis=1, keepdims=True)
        rows[:, :tokenizer_vocab] *= 1.0 - PADDED_ROW_DRAFT_MASS
    return rows


def draw_ids(rng: np.random.Generator, rows: np.ndarray) -> np.ndarray:
    """One id per row, drawn from the row's distribution (float64, renormalised)."""
    cdf = np.cumsum(rows, axis=-1)
    coins = rng.random(rows.shape[:-1]) * cdf[..., -1]
    return np.minimum((cdf <= coins[..., None]).sum(axis=-1), rows.shape[-1] - 1).astype(np.int64)


def _assemble(name: str, seed: int, rng: np.random.Generator, shape: KernelShape, target: np.ndarray, draft: np.ndarray,
              draft_ids: np.ndarray | None = None) -> ChainInput:
    target32 = target.astype(np.float32)
    draft32 = draft.astype(np.float32)
    ids = draw_ids(rng, draft32.astype(np.float64)) if draft_ids is None else draft_ids
    coins = rng.random((shape.batch, shape.steps), dtype=np.float32)
    final = rng.random(shape.batch, dtype=np.float32)
    return ChainInput(name, target32, draft32, ids.astype(np.int64), coins, final, shape.tokenizer_vocab, seed)


def _targets(rng: np.random.Generator, shape: KernelShape) -> np.ndarray:
    flat = nucleus_rows(rng, shape.batch * (shape.steps + 1), shape.tokenizer_vocab, shape.kernel_vocab)
    return flat.reshape(shape.batch, shape.steps + 1, shape.kernel_vocab)


def _drafts_near(rng: np.random.Generator, target: np.ndarray, shape: KernelShape, closeness: tuple[float, float]) -> np.ndarray:
    """q = w*p + (1-w)*softmax noise, w per row and step: a draft model that agrees partly."""
    noise = softmax_rows(rng, shape.batch * shape.steps, shape.tokenizer_vocab, shape.kernel_vocab).reshape(shape.batch, shape.steps, -1)
    weight = rng.uniform(*closeness, size=(shape.batch, shape.steps, 1))
    return weight * target[:, : shape.steps] + (1.0 - weight) * noise


def well_formed(seed: int, shape: KernelShape) -> ChainInput:
    rng = np.random.default_rng(seed)
    target = _targets(rng, shape)
    return _assemble("well-formed", seed, rng, shape, target, _drafts_near(rng, target, shape, (0.5, 0.95)))


def _reaching_corrupt_step(seed: int, shape: KernelShape) -> tuple[np.random.Generator, np.ndarray, np.ndarray, np.ndarray]:
    """Target, draft and drafted ids where steps before CORRUPT_STEP have q == p (always accepted)
    and the corrupted step's draft is accepted only part of the time."""
    rng = np.random.default_rng(seed)
    target = _targets(rng, shape)
    draft = _drafts_near(rng, target, shape, (0.2, 0.6))
    draft[:, :CORRUPT_STEP] = target[:, :CORRUPT_STEP]
    ids = draw_ids(rng, draft)
    return rng, target, draft, ids


def _drafted_token_value(value: float, name: str) -> Callable[[int, KernelShape], ChainInput]:
    """q(X) = value on the drafted token of CORRUPT_STEP, X the target's favourite there (so that an
    accept rule that lets a bad q through does so often: coin * 1.5 < p(X) needs a large p(X))."""
    def build(seed: int, shape: KernelShape) -> ChainInput:
        rng, target, draft, ids = _reaching_corrupt_step(seed, shape)
        favourite = target[:, CORRUPT_STEP].argmax(axis=-1)
        target[np.arange(shape.batch), CORRUPT_STEP, favourite] += 1.5  # a confident step: p(X) about 0.6
        target[:, CORRUPT_STEP] /= target[:, CORRUPT_STEP].sum(axis=-1, keepdims=True)
        ids[:, CORRUPT_STEP] = favourite
        made = _assemble(name, seed, rng, shape, target, draft, ids)
        made.draft_probs[np.arange(shape.batch), CORRUPT_STEP, ids[:, CORRUPT_STEP]] = value
        return made
    return build


def _whole_row_value(value: float, name: str) -> Callable[[int, KernelShape], ChainInput]:
    def build(seed: int, shape: KernelShape) -> ChainInput:
        rng, target, draft, ids = _reaching_corrupt_step(seed, shape)
        made = _assemble(name, seed, rng, shape, target, draft, ids)
        made.draft_probs[:, CORRUPT_STEP, :] = value
        return made
    return build


def _ceil_page(column: int) -> int:
    return -(-column // PAGE_SIZE) * PAGE_SIZE


def _neg_inf_run(covering: bool) -> Callable[[int, KernelShape], ChainInput]:
    """The recycled pool block's -inf mask: -inf from the row's sequence length L to the next multiple of 64,
    on CORRUPT_STEP, either sparing the drafted token or covering it."""
    name = "neg-inf-run-covers-draft" if covering else "neg-inf-run-spares-draft"

    def build(seed: int, shape: KernelShape) -> ChainInput:
        rng, target, draft, ids = _reaching_corrupt_step(seed, shape)
        starts = np.empty(shape.batch, dtype=np.int64)
        for row in range(shape.batch):
            if covering:
                drafted = int(ids[row, CORRUPT_STEP])
                if drafted % PAGE_SIZE == 0:  # a run [L, ceil64(L)) cannot cover an aligned column: draft its neighbour
                    drafted += 1
                    ids[row, CORRUPT_STEP] = drafted
                starts[row] = rng.integers(drafted - drafted % PAGE_SIZE + 1, drafted + 1)
            else:
                drafted = int(ids[row, CORRUPT_STEP])
                while True:
                    start = int(rng.integers(1, shape.kernel_vocab - 1))
                    if start % PAGE_SIZE and not start <= drafted < _ceil_page(start):
                        break
                starts[row] = start
        made = _assemble(name, seed, rng, shape, target, draft, ids)
        for row, start in enumerate(starts.tolist()):
            made.draft_probs[row, CORRUPT_STEP, start : min(_ceil_page(start), shape.kernel_vocab)] = -np.inf
        return made
    return build


def p_equals_q(seed: int, shape: KernelShape) -> ChainInput:
    """q == p at every step: the residual (p - q)+ is zero everywhere, and with drafts drawn from
    q every draft is accepted (coin * q < p for any coin < 1)."""
    rng = np.random.default_rng(seed)
    target = _targets(rng, shape)
    return _assemble("p-equals-q", seed, rng, shape, target, target[:, : shape.steps].copy())


def all_accepted(seed: int, shape: KernelShape) -> ChainInput:
    """q != p, but every drafted token has 0 < q(X) <= p(X): each draft is accepted whatever the
    coin, and the row commits the bonus token, drawn from the last target row."""
    rng = np.random.default_rng(seed)
    target = _targets(rng, shape)
    draft = _drafts_near(rng, target, shape, (0.5, 0.95))
    gap = np.where(draft > 0, target[:, : shape.steps] - draft, -np.inf)
    ids = gap.argmax(axis=-1)
    return _assemble("all-accepted", seed, rng, shape, target, draft, ids)


def degenerate_residual(seed: int, shape: KernelShape) -> ChainInput:
    """p == q at the corrupted step and the drafted token outside both (q(X) = p(X) = 0): the draft
    is rejected and the residual has no mass.  Only a malformed q reaches this (X was drawn from
    q), and both releases commit vocab_size - 1 here, 0.5.23 by design (see its comment): it is a
    conformance input, not a kernel-suite class."""
    rng = np.random.default_rng(seed)
    target = _targets(rng, shape)
    draft = target[:, : shape.steps].copy()
    ids = draw_ids(rng, draft)
    for row in range(shape.batch):
        outside = np.flatnonzero(target[row, CORRUPT_STEP, : shape.tokenizer_vocab] == 0)
        ids[row, CORRUPT_STEP] = rng.choice(outside)
    return _assemble("degenerate-residual", seed, rng, shape, target, draft, ids)


PARTIAL_PREFIX_RATIO = 0.9  # p(X)/q(X) of the drafts before the corrupted step


def partial_prefix_q_negative(seed: int, shape: KernelShape) -> ChainInput:
    """The drafts before CORRUPT_STEP are the target's favourites with p(X)/q(X) = 0.9 (accepted 90% of
    the time by token verification; block verification's prefix probability 0.81 < 1), q == p elsewhere,
    and the drafted token of CORRUPT_STEP has q(X) = -0.25.  Block verification then weighs stopping
    before the corrupted step with the residual mass of that step's row: the case where a q guard there
    matters (with q == p before it, as in the other classes, the prefix probability is 1 and it is never
    computed)."""
    rng = np.random.default_rng(seed)
    target = _targets(rng, shape)
    rows = np.arange(shape.batch)
    favourite = target[:, : shape.steps].argmax(axis=-1)
    target[rows, CORRUPT_STEP, favourite[:, CORRUPT_STEP]] += 1.5  # a confident step, as in the draft-q-* classes
    target[:, CORRUPT_STEP] /= target[:, CORRUPT_STEP].sum(axis=-1, keepdims=True)
    draft = target[:, : shape.steps].copy()
    for step in range(CORRUPT_STEP):
        x = favourite[:, step]
        p_x = target[rows, step, x]
        q_x = p_x / PARTIAL_PREFIX_RATIO
        draft[rows, step] *= ((1.0 - q_x) / (1.0 - p_x))[:, None]  # the rest scaled so q sums to 1
        draft[rows, step, x] = q_x
    ids = draw_ids(rng, draft)
    ids[:, : CORRUPT_STEP + 1] = favourite[:, : CORRUPT_STEP + 1]
    made = _assemble("partial-prefix-q-negative", seed, rng, shape, target, draft, ids)
    made.draft_probs[rows, CORRUPT_STEP, ids[:, CORRUPT_STEP]] = -0.25
    return made


UNDERFLOW = 1e-30  # below float32's smallest subnormal once scaled; real ids here are above 1e-7
MASKED_LOGIT_GAP = 240.0  # a zero probability as a logit this far below the row's best (exp(-240) is 0 in float32)


def masked_logits(probs: np.ndarray) -> np.ndarray:
    """float64 logits log p, a zero probability at MASKED_LOGIT_GAP below the row's best logit (a masked
    row of a real model: finite, never sampled)."""
    probs = probs.astype(np.float64)
    with np.errstate(divide="ignore"):
        logs = np.log(probs)
    floor = logs.max(axis=-1, keepdims=True) - MASKED_LOGIT_GAP
    return np.where(probs > 0, logs, floor)


def apply_temperature_top_p(logits: np.ndarray, temperature: np.ndarray, top_p: np.ndarray | None) -> np.ndarray:
    """float64 (B, S, V) probabilities that logits (B, S, V) give after per-row temperature (0: greedy, a
    one-hot argmax) and top-p (the smallest-probability ids removed while their cumulative mass is at most
    1 - top_p, the top id always kept: the rule of vLLM's apply_top_k_top_p_pytorch,
    vllm/v1/sample/ops/topk_topp_sampler.py:504-511)."""
    out = np.empty_like(logits, dtype=np.float64)
    for row in range(logits.shape[0]):
        t = float(temperature[row])
        if t == 0.0:
            out[row] = 0.0
            out[row, np.arange(logits.shape[1]), logits[row].argmax(axis=-1)] = 1.0
            continue
        scaled = logits[row] / t
        probs = np.exp(scaled - scaled.max(axis=-1, keepdims=True))
        probs[probs < UNDERFLOW] = 0.0  # what float32 softmax makes of a masked row (e^-240/T)
        probs /= probs.sum(axis=-1, keepdims=True)
        if top_p is not None and top_p[row] < 1.0:
            order = np.argsort(probs, axis=-1, kind="stable")
            ascending = np.take_along_axis(probs, order, axis=-1)
            drop = np.cumsum(ascending, axis=-1) <= 1.0 - float(top_p[row])
            drop[:, -1] = False
            np.put_along_axis(probs, order, np.where(drop, 0.0, ascending), axis=-1)
            probs /= probs.sum(axis=-1, keepdims=True)
        out[row] = probs
    return out


def sampling_targets(data: ChainInput) -> np.ndarray:
    """(B, k+1, V) float64: the distribution each position must be sampled from (the target rows
    themselves, or after the rows' temperature and top-p for a logit-taking engine)."""
    if data.temperature is None and data.top_p is None:
        return data.target_probs.astype(np.float64)
    temperature = np.ones(data.batch) if data.temperature is None else data.temperature
    return apply_temperature_top_p(masked_logits(data.target_probs), temperature, data.top_p)


def _greedy_drafts(rng: np.random.Generator, data: ChainInput, agree: float = 0.6) -> np.ndarray:
    """Drafts that equal the target's argmax with probability `agree` per step, else the drawn id."""
    argmax = data.target_probs[:, : data.draft_ids.shape[1]].argmax(axis=-1)
    return np.where(rng.random(data.draft_ids.shape) < agree, argmax, data.draft_ids).astype(np.int64)


def no_draft_probs(seed: int, shape: KernelShape) -> ChainInput:
    """Well-formed rows, the sampler not shown q (vLLM's draft_probs=None: an n-gram drafter)."""
    return replace(well_formed(seed, shape), input_class="no-draft-probs", with_draft_probs=False)


def greedy_rows(seed: int, shape: KernelShape) -> ChainInput:
    """Every row greedy (temperature 0); drafts agree with the target's argmax 60% of the time."""
    made = well_formed(seed, shape)
    ids = _greedy_drafts(np.random.default_rng(seed + 1), made)
    return replace(made, input_class="greedy", draft_ids=ids, temperature=np.zeros(shape.batch, dtype=np.float32))


def mixed_greedy_random(seed: int, shape: KernelShape) -> ChainInput:
    """Greedy and random rows in one batch (every other row temperature 0, the rest 1)."""
    made = well_formed(seed, shape)
    ids = _greedy_drafts(np.random.default_rng(seed + 1), made)
    temperature = np.where(np.arange(shape.batch) % 2 == 0, 0.0, 1.0).astype(np.float32)
    return replace(made, input_class="mixed-greedy-random", draft_ids=ids, temperature=temperature)


TOP_P_MARGIN = 2e-3  # the top-p cut sits at least this far from every cumulative boundary (no float ties)


def clear_top_p(processed: np.ndarray, keep: int) -> float | None:
    """A top-p for one row's (S, V) probabilities that keeps exactly the `keep` likeliest ids at every
    position, halfway between the boundaries; None when no such value clears TOP_P_MARGIN."""
    descending = -np.sort(-processed, axis=-1)
    cumulative = np.cumsum(descending, axis=-1)
    lower = float(cumulative[:, keep - 2].max()) if keep >= 2 else 0.0
    upper = float(cumulative[:, keep - 1].min())
    return (lower + upper) / 2 if upper - lower > 2 * TOP_P_MARGIN else None


def temperature_top_p(seed: int, shape: KernelShape) -> ChainInput:
    """Per-row temperature (0.6, 1.0, 1.4 in turn) and top-p: each target row is a head of 12 ids and a
    tail of 48 ids holding 1% of the mass; top-p is chosen per row to cut exactly the tail at every
    position, with a clear margin (a row where no value clears it keeps top-p 1)."""
    rng = np.random.default_rng(seed)
    head, tail = 12, 48
    target = np.zeros((shape.batch, shape.steps + 1, shape.kernel_vocab))
    for row in range(shape.batch):
        for step in range(shape.steps + 1):
            ids = rng.choice(shape.tokenizer_vocab - 1, size=head + tail, replace=False)
            target[row, step, ids[:head]] = 0.99 * rng.dirichlet(np.full(head, 4.0))
            target[row, step, ids[head:]] = 0.01 * rng.dirichlet(np.full(tail, 4.0))
    draft = _drafts_near(rng, target, shape, (0.5, 0.95))
    made = _assemble("temperature-top-p", seed, rng, shape, target, draft)
    temperature = np.array([(0.6, 1.0, 1.4)[row % 3] for row in range(shape.batch)], dtype=np.float32)
    logits = masked_logits(made.target_probs)
    top_p = np.ones(shape.batch, dtype=np.float32)
    for row in range(shape.batch):
        processed = apply_temperature_top_p(logits[row : row + 1], temperature[row : row + 1], None)[0]
        chosen = clear_top_p(processed, head)
        if chosen is not None:
            top_p[row] = chosen
    return replace(made, temperature=temperature, top_p=top_p)


# The kernel suite's classes, in report order; each builder takes (seed, shape).
INPUT_CLASSES: dict[str, Callable[[int, KernelShape], ChainInput]] = {
    "well-formed": well_formed,
    "neg-inf-run-spares-draft": _neg_inf_run(covering=False),
    "neg-inf-run-covers-draft": _neg_inf_run(covering=True),
    "draft-q-zero": _drafted_token_value(0.0, "draft-q-zero"),
    "draft-q-nan": _drafted_token_value(np.nan, "draft-q-nan"),
    "draft-q-posinf": _drafted_token_value(np.inf, "draft-q-posinf"),
    "draft-q-negative": _drafted_token_value(-0.25, "draft-q-negative"),
    "draft-q-above-one": _drafted_token_value(1.5, "draft-q-above-one"),
    "q-row-zero": _whole_row_value(0.0, "q-row-zero"),
    "q-row-nan": _whole_row_value(np.nan, "q-row-nan"),
    "q-row-posinf": _whole_row_value(np.inf, "q-row-posinf"),
    "q-row-neginf": _whole_row_value(-np.inf, "q-row-neginf"),
    "p-equals-q": p_equals_q,
    "all-accepted": all_accepted,
    "partial-prefix-q-negative": partial_prefix_q_negative,
}
# Classes of engines that take logits and sampling parameters (vLLM): its sampling paths, on well-formed
# q.  The corrupted-q classes above are SGLang's recycled-draft_probs bug; vLLM's draft probabilities come from its own
# softmax and are not given to it malformed.
VLLM_CLASSES: dict[str, Callable[[int, KernelShape], ChainInput]] = {
    "well-formed": well_formed,
    "no-draft-probs": no_draft_probs,
    "greedy": greedy_rows,
    "mixed-greedy-random": mixed_greedy_random,
    "temperature-top-p": temperature_top_p,
    "p-equals-q": p_equals_q,
    "all-accepted": all_accepted,
}
CONFORMANCE_ONLY_CLASSES: dict[str, Callable[[int, KernelShape], ChainInput]] = {"degenerate-residual": degenerate_residual}
WELL_FORMED_CLASSES = ("well-formed", "p-equals-q", "all-accepted")
LATER_CLASSES = ("partial-prefix-q-negative",)  # added after the others: seeded after them, so theirs stay


def class_seed(base_seed: int, input_class: str) -> int:
    """A stable per-class seed: the base seed and the class's position, so classes differ and a
    class keeps its rows when others are added after it."""
    names = [name for name in INPUT_CLASSES if name not in LATER_CLASSES] + list(CONFORMANCE_ONLY_CLASSES) + list(LATER_CLASSES)
    names += [name for name in VLLM_CLASSES if name not in names]
    return base_seed * 1000 + names.index(input_class)


def build_input(input_class: str, base_seed: int, shape: KernelShape) -> ChainInput:
    builders = {**INPUT_CLASSES, **CONFORMANCE_ONLY_CLASSES, **VLLM_CLASSES}
    if input_class not in builders:
        raise SpecsuiteError(f"unknown kernel input class {input_class!r}; known: {', '.join(builders)}")
    return builders[input_class](class_seed(base_seed, input_class), shape)
