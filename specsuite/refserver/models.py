"""Target and draft models over the shared n-gram tables, with the padded-row degeneration.

Degeneration is an emulation: a real network that has read an untrained embedding row
(a padded-vocabulary id such as the sampler's fallback `vocab_size - 1`) produces garbage from
there on.  Here, once a context holds padded-row ids, both the target and the draft (an EAGLE
head reads the target's hidden states, so it degenerates with it) shift their mass toward
token 0 (`!`) and special fragments (`</think>`, `<tool_call>`); the more padded ids, the more.
Draft and target then agree on the garbage, so acceptance climbs, as it does on a real server with the bug.
"""

from __future__ import annotations

import numpy as np

from specsuite.refserver.ngram import NgramModel, context_tails

_DEGENERATE_WEIGHT_PER_PADDED_ID = 0.85  # weight = 1 - 0.85**count: 0.15, 0.28, 0.39, ...
_DEGENERATE_MAX_WEIGHT = 0.9


class DegeneratingModel:
    """Next-token distributions from an n-gram model at a given order, with padded-row degeneration."""

    def __init__(self, ngram: NgramModel, max_order: int, garbage_ids: dict[int, float], lower_mix: tuple[int, float] | None = None) -> None:
        self.ngram = ngram
        self.max_order = max_order
        self.lower_mix = lower_mix
        self.vocab_size = ngram.vocab_size
        self.tokenizer_length = ngram.tokenizer_length
        garbage = np.zeros(ngram.vocab_size)
        for token_id, weight in garbage_ids.items():
            garbage[token_id] = weight
        self.garbage = garbage / garbage.sum()
        self.judged_row_gap: float | None = None

    def padded_row_gaps(self) -> np.ndarray:
        """Each padded row's logit gap below the smallest real logit: the n-gram model's for all, except that
        `judged_row_gap` (a test knob: a real checkpoint's untrained rows get a little mass) moves the rows before the
        fallback `vocab_size - 1`."""
        gaps = np.full(self.vocab_size - self.tokenizer_length, self.ngram.padded_row_logit_gap)
        if self.judged_row_gap is not None and gaps.size > 1:
            gaps[:-1] = self.judged_row_gap
        return gaps

    @property
    def tail_width(self) -> int:
        return self.ngram.tail_width

    def probabilities(self, tails: np.ndarray, padded_counts: np.ndarray) -> np.ndarray:
        """(N, vocab_size) next-token probabilities from context tails and each context's count
        of padded-row ids.  Padded rows hold zero here; `tempered` gives them their mass."""
        probs = self.ngram.probabilities(tails, self.max_order, self.lower_mix)
        degenerate = np.flatnonzero(padded_counts)
        if degenerate.size:
            weight = np.minimum(1.0 - _DEGENERATE_WEIGHT_PER_PADDED_ID ** padded_counts[degenerate], _DEGENERATE_MAX_WEIGHT)
            probs[degenerate] = (1.0 - weight)[:, None] * probs[degenerate] + weight[:, None] * self.garbage
        return probs

    def tempered(self, probs: np.ndarray, temperature: np.ndarray) -> np.ndarray:
        """softmax(logits / T) per row, where logits = log(probs) on real rows and padded rows
        sit `padded_row_logit_gap` below the smallest real logit: far below, but never -inf,
        like untrained embedding rows.  Rows with T == 0 use T = 1 (callers take argmax)."""
        real = self.tokenizer_length
        inverse_t = 1.0 / np.where(temperature > 0, temperature, 1.0)
        out = np.empty_like(probs)
        needs_power = inverse_t != 1.0
        out[:, :real] = probs[:, :real]
        if needs_power.any():
            out[needs_power, :real] = probs[needs_power, :real] ** inverse_t[needs_power, None]
        # The smallest positive real probability: a row with masked ids (min_new_tokens) keeps
        # its padded rows where they were.
        smallest = np.where(probs[:, :real] > 0, probs[:, :real], np.inf).min(axis=1)
        floor = smallest[:, None] * np.exp(-self.padded_row_gaps())[None, :]
        out[:, real:] = floor ** inverse_t[:, None]
        out /= out.sum(axis=1, keepdims=True)
        return out

    def log_probs(self, probs: np.ndarray, temperature: np.ndarray) -> np.ndarray:
        """log_softmax(logits / T): what SGLang returns as logprobs (T == 0 gives the raw ones)."""
        with np.errstate(divide="ignore"):  # a masked id's logprob is -inf (clamped when reported)
            return np.log(self.tempered(probs, temperature))

    def probabilities_for_contexts(self, contexts: list[np.ndarray]) -> np.ndarray:
        """Convenience form for whole contexts (prefill, tests)."""
        tails = context_tails(contexts, self.tail_width)
        padded = np.array([int(np.count_nonzero(c >= self.tokenizer_length)) for c in contexts], dtype=np.int64)
        return self.probabilities(tails, padded)
