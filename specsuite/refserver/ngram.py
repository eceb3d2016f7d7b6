"""Interpolated n-gram language model: the reference server's target and draft "networks".

The model is trained at startup on the corpus the project generates (specsuite/refserver/corpus.py).
Each order n stores, for every (n-1)-token context seen in training, its continuation ids and
counts; contexts are keyed by a 64-bit rolling hash so lookups are one `searchsorted` per order
for the whole batch.  Probabilities use Witten-Bell interpolation down to an add-alpha unigram,
so every real token has non-zero mass and entropy stays realistic: sampling temperature and
top_p change the output.  The orders need not be contiguous: besides the short orders, long ones
(e.g. 12 and 24 tokens of context) let the model recall the document a prompt comes from, the
way a real LM conditions on its whole prompt rather than its last few tokens.

The same tables serve two models: the target uses every order, the draft ("EAGLE head") stops
at a lower order, which is cheaper and close to, but not the same as, the target.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

_HASH_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)
_HASH_OFFSET = np.uint64(0x632BE59BD9B4E019)


@dataclass(frozen=True)
class OrderTable:
    """Continuation counts for one n-gram order, indexed by hashed context."""

    context_length: int
    context_keys: np.ndarray  # sorted unique uint64 context hashes
    starts: np.ndarray  # int64 offsets into continuation arrays, len(keys)+1
    totals: np.ndarray  # float64 c(h): tokens seen after the context
    types: np.ndarray  # float64 N1+(h): distinct continuations
    continuation_ids: np.ndarray  # int64
    continuation_counts: np.ndarray  # float64
    denominators: np.ndarray  # float64 c(h) + N1+(h), precomputed: the lookups run every step
    backoff_weights: np.ndarray  # float64 N1+(h) / (c(h) + N1+(h))


def hash_windows(tokens: np.ndarray, context_length: int) -> np.ndarray:
    """Hash of tokens[i-context_length:i] for every i >= context_length (uint64, wrapping).

    The fold runs from the newest token back to the oldest, so the hash of a longer context
    extends the hash of its suffix: `tail_hashes` gets every order's key in one pass.
    """
    tokens = tokens.astype(np.uint64)
    count = len(tokens) - context_length
    hashes = np.full(max(count, 0), _HASH_OFFSET, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for back in range(1, context_length + 1):
            hashes = hashes * _HASH_MULTIPLIER + tokens[context_length - back : context_length - back + count] + np.uint64(1)
    return hashes


def tail_hashes(tails: np.ndarray, context_lengths: list[int]) -> dict[int, np.ndarray]:
    """For each context length, the hash of each row's last that-many ids (as `hash_windows`).

    The fold h_k = h_(k-1) * M + (id_k + 1) unrolls to OFFSET * M^k + sum_b (id_b + 1) * M^(k-b),
    so every length is one column of a single wrapping uint64 matrix product.
    """
    lengths = sorted(set(context_lengths))
    weights, offsets = _suffix_hash_weights(tuple(lengths))
    deepest = lengths[-1]
    columns = tails[:, tails.shape[1] - deepest :][:, ::-1].astype(np.uint64) + np.uint64(1)  # newest first
    with np.errstate(over="ignore"):
        hashes = columns @ weights + offsets
    return {length: hashes[:, index] for index, length in enumerate(lengths)}


@functools.lru_cache(maxsize=None)
def _suffix_hash_weights(lengths: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Weights[b, j] = M^(k_j - 1 - b) for b < k_j (else 0) and offsets[j] = OFFSET * M^k_j, mod 2^64."""
    deepest = lengths[-1]
    powers = [1]
    for _ in range(deepest):
        powers.append(powers[-1] * int(_HASH_MULTIPLIER) % 2**64)
    weights = np.zeros((deepest, len(lengths)), dtype=np.uint64)
    for j, length in enumerate(lengths):
        for back in range(length):
            weights[back, j] = powers[length - 1 - back]
    offsets = np.array([int(_HASH_OFFSET) * powers[length] % 2**64 for length in lengths], dtype=np.uint64)
    return weights, offsets


def context_tails(contexts: list[np.ndarray], width: int) -> np.ndarray:
    """The last `width` ids of each context as an (N, width) array, left-padded with -1."""
    tails = np.full((len(contexts), width), -1, dtype=np.int64)
    for row, context in enumerate(contexts):
        tail = context[len(context) - width :] if len(context) > width else context
        if len(tail):
            tails[row, width - len(tail) :] = tail
    return tails


def _build_order(corpus: np.ndarray, context_length: int) -> OrderTable:
    contexts = hash_windows(corpus, context_length)
    following = corpus[context_length:].astype(np.int64)
    order = np.lexsort((following, contexts))
    contexts, following = contexts[order], following[order]
    pair_start = np.ones(len(contexts), dtype=bool)
    pair_start[1:] = (contexts[1:] != contexts[:-1]) | (following[1:] != following[:-1])
    pair_index = np.flatnonzero(pair_start)
    pair_counts = np.diff(np.append(pair_index, len(contexts))).astype(np.float64)
    pair_contexts = contexts[pair_index]
    continuation_ids = following[pair_index]
    context_start = np.ones(len(pair_contexts), dtype=bool)
    context_start[1:] = pair_contexts[1:] != pair_contexts[:-1]
    starts = np.flatnonzero(context_start)
    totals = np.add.reduceat(pair_counts, starts)
    types = np.diff(np.append(starts, len(pair_contexts))).astype(np.float64)
    return OrderTable(
        context_length=context_length,
        context_keys=pair_contexts[starts],
        starts=np.append(starts, len(pair_contexts)).astype(np.int64),
        totals=totals,
        types=types,
        continuation_ids=continuation_ids,
        continuation_counts=pair_counts,
        denominators=totals + types,
        backoff_weights=types / (totals + types),
    )


def _expand_ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of arange(start, start+length) for each pair, without a Python loop."""
    total = int(lengths.sum())
    run_starts = np.cumsum(lengths) - lengths
    return np.repeat(starts - run_starts, lengths) + np.arange(total, dtype=np.int64)


class NgramModel:
    """Witten-Bell interpolated n-gram model over a padded vocabulary.

    `probabilities(tails, max_order)` returns a (batch, vocab_size) float32 matrix of
    probabilities over the real tokenizer ids; padded rows (ids >= tokenizer_length) get zero
    probability here and untrained-row logits in models.DegeneratingModel.
    """

    def __init__(
        self,
        corpus: np.ndarray,
        tokenizer_length: int,
        vocab_size: int,
        orders: tuple[int, ...],
        unigram_alpha: float = 0.5,
        padded_row_logit_gap: float = 25.0,
    ) -> None:
        if vocab_size < tokenizer_length:
            raise ValueError("vocab_size must be >= tokenizer_length")
        self.tokenizer_length = tokenizer_length
        self.vocab_size = vocab_size
        self.orders = tuple(sorted(set(orders)))
        self.max_order = self.orders[-1]
        self.padded_row_logit_gap = padded_row_logit_gap
        counts = np.bincount(corpus, minlength=tokenizer_length)[:tokenizer_length].astype(np.float64)
        unigram = np.zeros(vocab_size, dtype=np.float64)
        unigram[:tokenizer_length] = (counts + unigram_alpha) / (counts.sum() + unigram_alpha * tokenizer_length)
        self.unigram = unigram
        self.unigram32 = unigram.astype(np.float32)  # the dense work runs in float32, as on a GPU
        self.tables = [_build_order(corpus, n - 1) for n in self.orders if n >= 2]

    @property
    def tail_width(self) -> int:
        """How many trailing ids of a context the model reads."""
        return max(self.max_order - 1, 1)

    def probabilities(self, tails: np.ndarray, max_order: int | None = None, lower_mix: tuple[int, float] | None = None) -> np.ndarray:
        """Next-token probabilities for each row of context tails ((N, tail_width), -1 padded).

        `lower_mix=(order, weight)` returns weight * P_order + (1 - weight) * P_max_order: a
        model between two orders (the draft uses it to sit at a realistic accept length).

        Witten-Bell is unrolled for speed: P_h = (prod of back-off weights) * unigram + sum over
        orders n <= h of (prod of the back-off weights above n) * counts_n / (c + T), so the
        dense (N, V) work is one multiply however many orders are mixed in.
        """
        top = self.max_order if max_order is None else min(max_order, self.max_order)
        batch = len(tails)
        if batch == 1:
            return self._probabilities_one_row(tails, top, lower_mix)
        lookups = self._lookups(tails, top)
        backoff = np.ones((len(lookups), batch))
        for index, (_, rows, slots, table) in enumerate(lookups):
            backoff[index, rows] = table.backoff_weights[slots]
        components = [(1.0, top)] if lower_mix is None else [(lower_mix[1], min(lower_mix[0], top)), (1.0 - lower_mix[1], top)]
        sparse_weight = np.zeros((len(lookups), batch))
        unigram_weight = np.zeros(batch)
        for weight, highest in components:
            above = np.full(batch, weight)
            for index in reversed([i for i, lookup in enumerate(lookups) if lookup[0] <= highest]):
                sparse_weight[index] += above
                above = above * backoff[index]
            unigram_weight += above
        probs = unigram_weight.astype(np.float32)[:, None] * self.unigram32[None, :]
        row_offsets = np.arange(batch, dtype=np.int64) * self.vocab_size
        for index, (_, rows, slots, table) in enumerate(lookups):
            scale = sparse_weight[index, rows] / table.denominators[slots]
            starts = table.starts[slots]
            lengths = table.starts[slots + 1] - starts
            spans = _expand_ranges(starts, lengths)
            flat = np.repeat(row_offsets[rows], lengths) + table.continuation_ids[spans]
            probs.reshape(-1)[flat] += (table.continuation_counts[spans] * np.repeat(scale, lengths)).astype(np.float32)
        return probs

    def _probabilities_one_row(self, tails: np.ndarray, top: int, lower_mix: tuple[int, float] | None) -> np.ndarray:
        """`probabilities` for a single row (each draft step at concurrency 1), with scalar
        weights and slices instead of index arrays; the same arithmetic, bit for bit. Small
        numpy calls cost more than the work here, and this runs several times per decode step."""
        tail = tails[0]
        tables = [table for table in self.tables if table.context_length + 1 <= top]
        found: list[tuple[int, int, OrderTable]] = []  # (order, slot, table)
        if tables:
            keys = tail_hashes(tails, [table.context_length for table in tables])
            for table in tables:
                if tail[len(tail) - table.context_length] < 0:
                    break
                key = keys[table.context_length][0]
                slot = int(table.context_keys.searchsorted(key))
                if slot >= len(table.context_keys) or table.context_keys[slot] != key:
                    break
                found.append((table.context_length + 1, slot, table))
        components = [(1.0, top)] if lower_mix is None else [(lower_mix[1], min(lower_mix[0], top)), (1.0 - lower_mix[1], top)]
        sparse_weight = [0.0] * len(found)
        unigram_weight = 0.0
        for weight, highest in components:
            above = weight
            for index in reversed([i for i, (order, _, _) in enumerate(found) if order <= highest]):
                sparse_weight[index] += above
                above = above * float(found[index][2].backoff_weights[found[index][1]])
            unigram_weight += above
        probs = np.float32(unigram_weight) * self.unigram32
        for index, (_, slot, table) in enumerate(found):
            scale = sparse_weight[index] / float(table.denominators[slot])
            start, stop = table.starts[slot], table.starts[slot + 1]
            probs[table.continuation_ids[start:stop]] += (table.continuation_counts[start:stop] * scale).astype(np.float32)
        return probs[None, :]

    def _lookups(self, tails: np.ndarray, top: int) -> list[tuple[int, np.ndarray, np.ndarray, OrderTable]]:
        """For each order up to `top`: the rows whose context was seen in training and its slot.
        A context whose suffix was never seen cannot have been seen itself, so each order only
        looks up the rows the order below found."""
        tables = [table for table in self.tables if table.context_length + 1 <= top]
        if not tables:
            return []
        keys = tail_hashes(tails, [table.context_length for table in tables])
        candidates = np.arange(len(tails))
        lookups = []
        for table in tables:
            candidates = candidates[tails[candidates, tails.shape[1] - table.context_length] >= 0]
            if not candidates.size:
                break
            row_keys = keys[table.context_length][candidates]
            slots = np.searchsorted(table.context_keys, row_keys)
            slots_clipped = np.minimum(slots, len(table.context_keys) - 1)
            found = (slots < len(table.context_keys)) & (table.context_keys[slots_clipped] == row_keys)
            candidates = candidates[found]
            if not candidates.size:
                break
            lookups.append((table.context_length + 1, candidates, slots_clipped[found], table))
        return lookups
