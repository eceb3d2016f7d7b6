"""What a request's sampling parameters do to the target's next-token rows before the sampler.

SGLang's order (0.5.23): the additive penalties (frequency, presence, and min_new_tokens' -inf on
EOS and stop ids), then the multiplicative repetition penalty, then logit_bias
(srt/sampling/sampling_batch_info.py:409-441; the overlap scheduler's default path accumulates
additive then scaling penalties the same way, sampling/penaltylib/orchestrator.py:54-86).  Then
temperature, top-k/top-p and min-p, in sampling.py.

- frequency: logit -= frequency_penalty * count(id); presence: logit -= presence_penalty once an
  id occurred (penaltylib/frequency_penalty.py:39-47, presence_penalty.py);
- repetition: for an id that occurred, a negative logit is multiplied by the penalty, a positive
  one divided (penaltylib/repetition_penalty.py:77-83, 119-127);
- min_new_tokens: EOS and stop ids get -inf while fewer than min_new_tokens ids were generated
  (penaltylib/min_new_tokens.py:233-241);
- logit_bias: added by token id (sampling_batch_info.py:174-196, 439-441).

The counts are of output ids only: SGLang's penalizers are fed the last output id at each decode
step (managers/schedule_batch.py:3715-3734, called at :3769-3770), never the prompt.  Here the
model's "logits" are log-probabilities (models.py), so a logit is never positive and repetition
always multiplies; the rule is written out in full anyway.  Padded rows (ids >= the tokenizer
length) get their mass later, in models.tempered, so a logit_bias on one of them has no effect here.

A row's state is what precedes its token: output ids so far, and in a verify block the earlier
draft ids of the same block, which is what makes speculation lossless (`RowState.for_block`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specsuite.refserver.engine_request import EngineRequest, SamplingConfig


@dataclass(frozen=True)
class RowState:
    """What the penalties of each row of a block are computed from."""

    counts: np.ndarray | None  # (P, V) occurrences of each id before the row's token; None: no penalty asked
    lengths: np.ndarray  # (P,) output ids generated before the row's token (min_new_tokens)

    @classmethod
    def for_block(cls, request: EngineRequest, block_ids: list[int] | np.ndarray, vocab_size: int,
                  relaxed_penalties: bool = False, min_new_in_steps: bool = False) -> RowState:
        """Rows for the next token and one more per id of `block_ids` (a verify block's drafts).

        relaxed_penalties (fault arm): the counts are of the last id of each earlier commit only,
        the same for every row of the block.  min_new_in_steps (fault arm): the length is the
        number of earlier commits, the same for every row."""
        progress = request.computed
        positions = len(block_ids) + 1
        counts = None
        if request.sampling.penalized:
            fed = progress.step_last_ids if relaxed_penalties else progress.output_ids
            base = np.bincount(np.asarray(fed, dtype=np.int64), minlength=vocab_size)[:vocab_size]
            counts = np.repeat(base[None, :], positions, axis=0)
            if not relaxed_penalties:
                for row, token in enumerate(block_ids, start=1):
                    counts[row:, int(token)] += 1
        if min_new_in_steps:
            lengths = np.full(positions, len(progress.step_last_ids))
        else:
            lengths = len(progress.output_ids) + np.arange(positions)
        return cls(counts, lengths)


def adjust_rows(probs: np.ndarray, sampling: SamplingConfig, stop_ids: list[int], state: RowState, with_logit_bias: bool = True) -> np.ndarray:
    """The (P, V) rows after penalties, min_new_tokens and logit_bias, unnormalised (every consumer
    normalises or takes the argmax).  A request that asks for none of them gets `probs` back as is."""
    use_bias = with_logit_bias and bool(sampling.logit_bias)
    masked = np.flatnonzero(state.lengths < sampling.min_new_tokens) if stop_ids else np.empty(0, dtype=np.int64)
    if state.counts is None and not use_bias and masked.size == 0:
        return probs
    out = np.array(probs, dtype=np.float64, copy=True)
    if state.counts is not None or use_bias:
        with np.errstate(divide="ignore"):
            logits = np.log(out)  # zero-probability rows (padded ids, masked ids) stay -inf
        if state.counts is not None:
            counts = state.counts
            seen = counts > 0
            logits -= sampling.frequency_penalty * counts + sampling.presence_penalty * seen
            if sampling.repetition_penalty != 1.0:
                penalty = sampling.repetition_penalty
                logits = np.where(seen, np.where(logits < 0, logits * penalty, logits / penalty), logits)
        if use_bias:
            ids = np.fromiter(sampling.logit_bias.keys(), dtype=np.int64, count=len(sampling.logit_bias))
            logits[:, ids] += np.fromiter(sampling.logit_bias.values(), dtype=np.float64, count=len(ids))
        out = np.exp(logits - logits.max(axis=1, keepdims=True))
    if masked.size:
        out[np.ix_(masked, stop_ids)] = 0.0
    return out
