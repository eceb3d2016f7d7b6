"""The n-gram model's fast paths give the same numbers as the general ones, bit for bit.

`tail_hashes` (one matrix product) must agree with `hash_windows` (the fold used to build the
tables), and the single-row path of `probabilities` (each draft step at concurrency 1) with
the batched path; the batched path is forced by padding a batch of one to two rows.
"""

from __future__ import annotations

import numpy as np
import pytest

from specsuite.refserver.model_loading import DRAFT_LOWER_MIX, DRAFT_MAX_ORDER, load_reference_model
from specsuite.refserver.ngram import hash_windows, tail_hashes


@pytest.fixture(scope="module")
def model():
    return load_reference_model()


def corpus_tails(model, count: int, seed: int) -> np.ndarray:
    """Context tails cut from encoded corpus-like text (so the long orders are found), some left-padded."""
    text = "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. " * 3
    ids = np.asarray(model.encode(text), dtype=np.int64)
    rng = np.random.default_rng(seed)
    width = model.target.tail_width
    tails = np.stack([ids[end - width : end] for end in rng.integers(width, len(ids), count)])
    for row in range(0, count, 5):
        tails[row, : rng.integers(1, width)] = -1
    return tails


def test_tail_hashes_match_the_table_fold() -> None:
    rng = np.random.default_rng(0)
    tails = rng.integers(0, 8128, (9, 23))
    found = tail_hashes(tails, [1, 2, 3, 11, 23])
    for length, hashes in found.items():
        expected = np.array([hash_windows(row, length)[-1] for row in np.concatenate((tails, np.zeros((9, 1), np.int64)), axis=1)])
        assert np.array_equal(hashes, expected), length


@pytest.mark.parametrize("max_order, lower_mix", [(None, None), (DRAFT_MAX_ORDER, DRAFT_LOWER_MIX)])
def test_single_row_path_equals_batched_path(model, max_order, lower_mix) -> None:
    ngram = model.target.ngram
    tails = corpus_tails(model, 40, seed=1)
    for row in tails:
        single = ngram.probabilities(row[None, :], max_order, lower_mix)
        batched = ngram.probabilities(np.stack((row, row)), max_order, lower_mix)
        assert single.shape == (1, ngram.vocab_size)
        assert np.array_equal(single[0], batched[0])
