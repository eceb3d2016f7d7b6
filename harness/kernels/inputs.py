"""Inputs for one verify step of the chain sampler: well-formed rows and the seed's corruptions.

Every class is built from a fixed seed, so a failure names a row that can be rebuilt.  The shapes
follow a real model: the target p is a nucleus (top-p applied: zero outside a few hundred ids, and
zero on the padded rows [tokenizer_vocab, kernel_vocab), as an untrained padded row after masking
gives), the draft q is a full softmax (positive everywhere, a tiny mass on the padded rows, since
nothing masks the draft head's untrained rows).  Drafts are drawn from q.

Corruptions sit on one fixed draft step, `CORRUPT_STEP` (0-based index into draft_probs), as the
seed's did; the steps before it have q == p, so their drafts are always accepted and every row
reaches the corrupted step.  Coins are uniform float32 in [0, 1), like torch.rand's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from harness.errors import SpecsuiteError

CORRUPT_STEP = 2  # the seed's runs landed on the same draft step every time
PAGE_SIZE = 64  # the seed's -inf runs end on 64-aligned columns (page_size = 64)
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

    @property
    def batch(self) -> int:
        return int(self.draft_ids.shape[0])

    @property
    def kernel_vocab(self) -> int:
        return int(self.target_probs.shape[-1])

    def rows(self, index: np.ndarray | slice) -> ChainInput:
        """The same input restricted to some rows (a smaller batch with the same coins)."""
        return replace(self, target_probs=self.target_probs[index], draft_probs=self.draft_probs[index],
                       draft_ids=self.draft_ids[index], accept_coins=self.accept_coins[index], final_coins=self.final_coins[index])

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
    """The seed's corruption: -inf from the row's sequence length L to the next multiple of 64,
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
}
CONFORMANCE_ONLY_CLASSES: dict[str, Callable[[int, KernelShape], ChainInput]] = {"degenerate-residual": degenerate_residual}
WELL_FORMED_CLASSES = ("well-formed", "p-equals-q", "all-accepted")


def class_seed(base_seed: int, input_class: str) -> int:
    """A stable per-class seed: the base seed and the class's position, so classes differ and a
    class keeps its rows when others are added after it."""
    names = list(INPUT_CLASSES) + list(CONFORMANCE_ONLY_CLASSES)
    return base_seed * 1000 + names.index(input_class)


def build_input(input_class: str, base_seed: int, shape: KernelShape) -> ChainInput:
    builders = {**INPUT_CLASSES, **CONFORMANCE_ONLY_CLASSES}
    if input_class not in builders:
        raise SpecsuiteError(f"unknown kernel input class {input_class!r}; known: {', '.join(builders)}")
    return builders[input_class](class_seed(base_seed, input_class), shape)
