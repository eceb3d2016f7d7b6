"""The simulated CUDA-graph memory pool (specsuite/refserver/graph_pool.py) reproduces the recycled-draft_probs
bug's three signatures: every -inf run in the kept draft_probs view ends on a 64-aligned column (the
batch's longest sequence rounded up to the page size), the runs advance with the sequence length
from step to step, and they always land on the same draft step.  A copy taken before the verify
replay (the fix) is untouched.  The last test checks the same signatures on the q rows the no-fix
engine really hands to its sampler.
"""

from __future__ import annotations

import numpy as np
import pytest

import specsuite.refserver.engine as engine_module
from specsuite.refserver.engine import Engine, EngineConfig
from specsuite.refserver.engine_request import EngineRequest, LogprobConfig, SamplingConfig
from specsuite.refserver.graph_pool import PAGE_SIZE, GraphMemoryPool
from specsuite.refserver.model_loading import load_reference_model

VOCAB = 8128
STEPS = 5


def _draft_probs(rng: np.random.Generator, batch: int) -> np.ndarray:
    """Well-formed draft distributions: every entry finite and positive."""
    probs = rng.random((batch, STEPS, VOCAB), dtype=np.float32) + 1e-3
    return probs / probs.sum(axis=2, keepdims=True)


def _page_end(length: int) -> int:
    return -(-length // PAGE_SIZE) * PAGE_SIZE


def _nonfinite_run(row: np.ndarray) -> tuple[int, int]:
    """(start, end) of the single contiguous run of -inf entries in `row` (end exclusive)."""
    columns = np.flatnonzero(np.isneginf(row))
    assert columns.size, "no -inf entries"
    start, end = int(columns[0]), int(columns[-1]) + 1
    assert columns.size == end - start, "the -inf entries are not one contiguous run"
    return start, end


def test_runs_end_on_the_page_aligned_batch_maximum():
    rng = np.random.default_rng(0)
    for _ in range(20):
        batch = int(rng.integers(1, 9))
        seq_lens = rng.integers(1, 3000, size=batch)
        pool = GraphMemoryPool(16, STEPS, VOCAB, aliased_step=2)
        draft = _draft_probs(rng, batch)
        view = pool.replay_draft(draft)
        pool.replay_verify(seq_lens)
        end_expected = _page_end(int(seq_lens.max()))
        for row, seq_len in enumerate(seq_lens):
            start, end = _nonfinite_run(view[row, 2])
            assert end % PAGE_SIZE == 0 and end == end_expected
            assert start == seq_len
            assert (view[row, 2, :seq_len] == 0.0).all(), "the valid region is overwritten with 0"
            np.testing.assert_array_equal(view[row, 2, end:], draft[row, 2, end:])


def test_runs_advance_with_the_sequence_length():
    rng = np.random.default_rng(1)
    pool = GraphMemoryPool(4, STEPS, VOCAB, aliased_step=1)
    seq_len = 250
    starts = []
    for accept_length in rng.integers(1, STEPS + 2, size=30):
        view = pool.replay_draft(_draft_probs(rng, 1))
        pool.replay_verify(np.array([seq_len]))
        start, end = _nonfinite_run(view[0, 1])
        assert end == _page_end(seq_len)
        starts.append(start)
        seq_len += int(accept_length)
    assert starts[0] == 250
    assert np.all(np.diff(starts) > 0), "the run start moves forward every step"


@pytest.mark.parametrize("aliased_step", range(STEPS))
def test_only_the_aliased_draft_step_is_hit(aliased_step):
    rng = np.random.default_rng(2 + aliased_step)
    pool = GraphMemoryPool(8, STEPS, VOCAB, aliased_step)
    for _ in range(5):
        draft = _draft_probs(rng, 3)
        view = pool.replay_draft(draft)
        pool.replay_verify(rng.integers(10, 2000, size=3))
        finite_steps = np.isfinite(view).all(axis=(0, 2))
        assert finite_steps.tolist() == [step != aliased_step for step in range(STEPS)]
        others = [s for s in range(STEPS) if s != aliased_step]
        np.testing.assert_array_equal(view[:, others], draft[:, others])


def test_a_copy_taken_before_the_verify_replay_is_untouched():
    rng = np.random.default_rng(3)
    pool = GraphMemoryPool(8, STEPS, VOCAB, aliased_step=2)
    draft = _draft_probs(rng, 4)
    copied = pool.replay_draft(draft).copy()
    pool.replay_verify(np.array([100, 700, 1500, 64]))
    np.testing.assert_array_equal(copied, draft)


def test_aliased_step_must_be_a_draft_step():
    with pytest.raises(ValueError):
        GraphMemoryPool(4, STEPS, VOCAB, aliased_step=STEPS)


def test_nofix_engine_hands_the_sampler_q_rows_with_the_three_signatures(monkeypatch):
    """Run two sampled requests through the no-fix engine and inspect every q it samples with."""
    model = load_reference_model()
    config = EngineConfig(arm="nofix", num_steps=STEPS, num_draft_tokens=STEPS + 1, use_rejection_sampling=True,
                          max_running_requests=4, eos_ids=model.eos_ids)
    engine = Engine(config, model.target, model.draft, model.decode_text)
    prompts = [model.encode("Once upon a time, in a small village by the sea, there lived"),
               model.encode("Question: Natalia sold clips to 48 of her friends in April. How many clips did she sell?\nAnswer:")]
    requests = [EngineRequest(f"r{i}", np.asarray(ids, dtype=np.int64),
                              SamplingConfig(max_new_tokens=budget, temperature=1.0, top_p=0.95, ignore_eos=True),
                              LogprobConfig(), i, np.random.default_rng(i))
                for i, (ids, budget) in enumerate(zip(prompts, (60, 200), strict=False))]  # the second runs alone at the end
    seen: list[tuple[np.ndarray, list[int]]] = []  # (q as the sampler read it, sequence lengths at verify)
    real_sampler = engine_module.chain_rejection_sample

    def recording_sampler(target_probs, draft_probs, *args, **kwargs):
        # The engine's verify replay ran with the sequence lengths before this step's commit.
        lengths = [r.sequence_length for r in requests if r.finish_reason is None]
        seen.append((np.array(draft_probs, copy=True), lengths))
        return real_sampler(target_probs, draft_probs, *args, **kwargs)

    monkeypatch.setattr(engine_module, "chain_rejection_sample", recording_sampler)
    for request in requests:  # queued before the loop starts, so both are admitted together
        engine.submit(request)
    engine.start()
    try:
        for request in requests:
            assert request.finished.wait(timeout=30), "the engine did not finish"
    finally:
        engine.stop()

    step = config.aliased_draft_step
    for q, lengths in seen:
        assert len(lengths) == len(q)
        batch_end = _page_end(max(lengths))
        for row, seq_len in enumerate(lengths):
            # A row whose length is the page-aligned batch maximum has an empty -inf run.
            assert (q[row, step, :seq_len] == 0.0).all()
            assert np.isneginf(q[row, step, seq_len:batch_end]).all()
            assert np.isfinite(q[row, step, batch_end:]).all() and (q[row, step, batch_end:] > 0).all()
            assert all(np.isfinite(q[row, s]).all() for s in range(STEPS) if s != step)
    solo_lengths = [lengths[0] for q, lengths in seen if len(q) == 1]
    assert len(solo_lengths) > 10 and any(len(q) == 2 for q, _ in seen)
    assert np.all(np.diff(solo_lengths) > 0), "the run start moves forward with the sequence"
