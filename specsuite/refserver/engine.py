"""The reference server's engine: continuous batching with EAGLE chain drafting and verify.

One background thread runs the scheduler loop.  Each iteration admits waiting requests (prefill:
prompt logprobs and the first token), then runs one decode step for every running request:
with EAGLE, `num_steps` draft proposals from the draft model, one verify forward of the target
over the k+1 positions, then the verify path — greedy rows take the argmax path and never reach
the sampler, sampled rows go through the chain rejection sampler — and commits the accepted
tokens of each step, then applies SGLang's finish rules to the step as a whole (stop strings in list
order, then EOS/stop ids, then the length budget) and keeps the ids through the finish.

Sampling parameters act the same in both paths, so a correct speculative engine is lossless under
every one of them: each verify row j gets the penalties, min_new_tokens mask and logit_bias of the
output so far plus the block's drafts before it (logit_adjust.py), then temperature, SGLang's joint
top-k/top-p and min-p (sampling.py), as the speculation-off sampler does for the same ids.  The
fault arms (faults.py, `--fault-NAME`) break one of these in the speculative path only.

With --step-time-ms each decode result belongs to a numbered step of an emulated device and is
published at that step's deadline (step_clock.py); the engine computes up to
STEPS_COMPUTED_AHEAD steps ahead of the device, so its own compute time, as long as it keeps up
on average, does not reach the chunk times. The server then runs this engine in its own process
(engine_process.py).

The arms differ only where the recycled-draft_probs bug lives: whether `draft_probs` is still a view into the
graph memory pool when the sampler reads it (nofix, guards-only) or a copy (fix, copy-only), and
whether the sampler's range guards are on (fix, guards-only).  With `--sampler` naming one of
SGLang's kernels (kernel_sampler.py), that kernel decides the sampled rows instead, its own guards
or lack of them included; the arm then decides only the copy.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from specsuite.refserver import faults as fault_arms
from specsuite.refserver.engine_request import EngineRequest
from specsuite.refserver.graph_pool import GraphMemoryPool
from specsuite.refserver.kernel_sampler import NUMPY_SAMPLER, KernelChainSampler, numpy_sampler_identity
from specsuite.refserver.logit_adjust import RowState, adjust_rows
from specsuite.refserver.models import DegeneratingModel
from specsuite.refserver.ngram import context_tails
from specsuite.refserver.sampling import (
    SamplerGuards,
    apply_min_p,
    chain_rejection_sample,
    greedy_verify,
    lossy_greedy_argmax,
    renormalize_top_k_top_p,
    sample_from,
)
from specsuite.refserver.step_clock import NOTHING_OWED, StepPublisher, StepSink, StepTimeline

ARMS = ("fix", "nofix", "copy-only", "guards-only")
# With step emulation, how far the engine may compute ahead of the emulated device. Results do not
# depend on when they are computed and newcomers join by the clock, not by the engine's position,
# so a long lead costs nothing but memory and lets the host absorb a slow patch of the machine.
STEPS_COMPUTED_AHEAD = 256


@dataclass(frozen=True)
class EngineConfig:
    """Engine settings, resolved from the command line."""

    arm: str = "fix"
    speculative_algorithm: str = "EAGLE"  # or "NONE"
    num_steps: int = 5
    num_draft_tokens: int = 6
    use_rejection_sampling: bool = True
    disable_cuda_graph: bool = False
    max_running_requests: int = 48
    random_seed: int = 0
    step_time_ms: float = 0.0
    extra_step_us: float = 0.0
    bias_accept: float = 0.0
    lossy_greedy_gap: float = 0.0  # TEST KNOB: greedy verify takes the runner-up where the top-2 gap is below this (nats)
    accept_inflation: float = 1.0
    sampler: str = NUMPY_SAMPLER  # or a kernel source for specsuite.kernel_loading.loader (kernel_sampler.py)
    eos_ids: tuple[int, ...] = ()
    decode_log_interval: int = 40
    aliased_draft_step: int = 2  # fixed by "capture order"
    faults: frozenset[str] = frozenset()  # fault arms of the speculative path (faults.py)

    @property
    def speculative(self) -> bool:
        return self.speculative_algorithm != "NONE"

    def has_fault(self, name: str) -> bool:
        return name in self.faults

    @property
    def copies_draft_probs(self) -> bool:
        return self.arm in ("fix", "copy-only")

    @property
    def sampler_guards(self) -> bool:
        return self.arm in ("fix", "guards-only")


@dataclass
class EngineCounters:
    """Lifetime counters exported on /metrics, plus SGLang's folded spec statistics."""

    draft_probs_nonfinite_entries: int = 0
    draft_probs_nonfinite_batches: int = 0
    draft_probs_last_batch_nonfinite: int = 0
    sampler_batches: int = 0
    sampler_fallback_emissions: int = 0
    sampler_guard_replacements: int = 0
    drafted_tokens: int = 0
    accepted_drafts: int = 0
    verify_calls: int = 0
    generation_tokens: int = 0
    prompt_tokens: int = 0
    requests_finished: int = 0
    requests_aborted: int = 0
    # With --step-time-ms: steps on the clock, and those the host computed too late for it.
    emulated_steps: int = 0
    emulated_steps_late: int = 0
    emulated_late_seconds: float = 0.0
    decode_iterations: int = 0
    # SGLang folds interval spec stats into lifetime totals every decode_log_interval iterations.
    interval_accept_tokens: int = 0
    interval_forward_ct: int = 0
    interval_correct_drafts: int = 0
    total_accept_tokens: int = 0
    total_forward_ct: int = 0
    last_interval_accept_length: float | None = None
    last_interval_accept_rate: float | None = None
    extra: dict[str, float] = field(default_factory=dict)


class Engine:
    """Continuous-batching speculative-decoding engine (one scheduler thread)."""

    def __init__(
        self,
        config: EngineConfig,
        target: DegeneratingModel,
        draft: DegeneratingModel,
        decode_text: Callable[..., str],
        publisher: StepSink | None = None,
    ) -> None:
        self.config = config
        self.target = target
        self.draft = draft
        self.decode_text = decode_text
        self.vocab_size = target.vocab_size
        self.tokenizer_length = target.tokenizer_length
        self.guards = SamplerGuards(config.sampler_guards, target.tokenizer_length)
        # Loaded here, in the process that calls it: EngineProcess builds the engine after its fork.
        self.kernel_sampler = KernelChainSampler.load(config.sampler) if config.sampler != NUMPY_SAMPLER else None
        self.pool = None
        if config.speculative and not config.disable_cuda_graph:
            self.pool = GraphMemoryPool(config.max_running_requests, config.num_steps, self.vocab_size, config.aliased_draft_step)
        self.counters = EngineCounters()
        # The engine's own stream: only the batch-ignores-seed fault arm draws from it.
        self._shared_rng = np.random.default_rng([config.random_seed, 0x5EED])
        self.waiting: deque[EngineRequest] = deque()
        self.running: list[EngineRequest] = []
        self._wake = threading.Condition()
        self._stopping = False
        self._step_requests: dict[int, EngineRequest] | None = None  # notified in the open step
        self._timeline = None
        if self._emulates_step_time:
            self._timeline = StepTimeline((config.step_time_ms * 1000.0 + config.extra_step_us) / 1e6)
        # Where finished steps go: published in this process, or sent to the HTTP process.
        self._publisher: StepSink = publisher or StepPublisher()
        self._thread = threading.Thread(target=self._loop, name="refserver-engine", daemon=True)

    # ----------------------------------------------------------------- lifecycle and intake
    def start(self) -> None:
        if self._timeline is not None:
            self._publisher.start()
        self._thread.start()

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    @property
    def sampler_identity(self) -> dict:
        """Which sampler decides the sampled verify rows, for /server_info and the startup log."""
        if self.kernel_sampler is not None:
            return self.kernel_sampler.identity()
        return numpy_sampler_identity(self.guards.enabled)

    def queue_lengths(self) -> tuple[int, int]:
        """(running, waiting), for /metrics."""
        return len(self.running), len(self.waiting)

    def stop(self) -> None:
        with self._wake:
            self._stopping = True
            self._wake.notify_all()
        self._thread.join(timeout=5)
        if self._timeline is not None:
            self._publisher.stop()

    def submit(self, request: EngineRequest) -> None:
        request.created_at = time.time()
        with self._wake:
            self.waiting.append(request)
            self._wake.notify_all()

    def abort(self, request: EngineRequest) -> None:
        """Mark a request aborted (client gone); the loop frees it at the next iteration."""
        request.aborted = True
        with self._wake:
            self._wake.notify_all()

    def flush_spec_statistics(self) -> bool:
        """What /flush_cache resets: the lifetime spec totals. Refused while requests run."""
        with self._wake:
            if self.running or self.waiting:
                return False
            c = self.counters
            c.total_accept_tokens = c.total_forward_ct = 0
            c.interval_accept_tokens = c.interval_forward_ct = c.interval_correct_drafts = 0
            return True

    def average_accept_length(self) -> float | None:
        c = self.counters
        return c.total_accept_tokens / c.total_forward_ct if c.total_forward_ct else None

    # ----------------------------------------------------------------- scheduler loop
    def _loop(self) -> None:
        while True:
            with self._wake:
                while not self._stopping and not self.waiting and not self._has_work():
                    self._wake.wait(timeout=self._idle_wait())
                if self._stopping:
                    return
                admitted = []
                while self.waiting and len(self.running) + len(admitted) < self.config.max_running_requests:
                    admitted.append(self.waiting.popleft())
            self._drop_aborted(admitted)
            if admitted:
                self._prefill([r for r in admitted if not r.aborted])
                if self._timeline is not None:
                    now, busy = time.perf_counter(), bool(self.running)
                    for request in admitted:
                        request.device_step = self._timeline.join(now, busy)
            gone = [r for r in self.running if r.aborted and r.computed.finish_reason is None]
            if gone:  # out of the running list before their finish is published (/metrics, /flush_cache)
                self.running = [r for r in self.running if r not in gone]
                self._drop_aborted(gone)
            decoding = [r for r in self.running if r not in admitted and self._may_compute(r)]
            self._step_requests = {}
            if decoding:
                self._decode_step(decoding)
            # The running list is current before the step is published: a client that sees its
            # finish may /flush_cache at once.
            self.running = [r for r in self.running + admitted if r.computed.finish_reason is None]
            touched, self._step_requests = self._step_requests, None
            if self._timeline is None:
                self._publisher.publish_now([(request, request.mark()) for request in touched.values()])
                continue
            # An emulated device's results appear when its step ends, not when our compute does.
            marks = []
            for request in touched.values():
                marks.append((request.device_step, request, request.mark()))
                request.device_step += 1
            owed_from = min((r.device_step for r in self.running), default=NOTHING_OWED)
            completed = self._timeline.hand_in(marks, owed_from, time.perf_counter())
            c = self.counters
            c.emulated_steps, c.emulated_steps_late, c.emulated_late_seconds = self._timeline.steps_completed, *self._timeline.late
            for deadline, step_marks in completed:
                self._publisher.schedule(deadline, step_marks)

    def _may_compute(self, request: EngineRequest) -> bool:
        """Without emulation always; with it, while the request is less than the lead ahead of
        the device (a late host is absorbed, but the engine does not run away)."""
        return self._timeline is None or self._timeline.may_compute(request.device_step, STEPS_COMPUTED_AHEAD, time.perf_counter())

    def _has_work(self) -> bool:
        return any(request.aborted or self._may_compute(request) for request in self.running)

    def _idle_wait(self) -> float:
        """How long the loop may sleep: until the next step is due when computing ahead is what
        waits (new requests and aborts wake it sooner)."""
        due = self._timeline.seconds_to_next_deadline(time.perf_counter()) if self._timeline is not None else None
        return 0.5 if due is None else max(due, 0.0)

    @property
    def _emulates_step_time(self) -> bool:
        return self.config.step_time_ms > 0 or self.config.extra_step_us > 0

    def _notify(self, request: EngineRequest) -> None:
        """Publish the request's progress and wake its HTTP handler now, or, inside a decode
        step, when that step is published."""
        if self._step_requests is None:
            self._publisher.publish_now([(request, request.mark())])
        else:
            self._step_requests[id(request)] = request  # by identity: once per request

    def _drop_aborted(self, requests: list[EngineRequest]) -> None:
        for request in requests:
            if request.aborted and request.computed.finish_reason is None:
                self.counters.requests_aborted += 1
                self._finish(request, {"type": "abort", "message": "client disconnected", "status_code": None, "err_type": None})

    # ----------------------------------------------------------------- prefill
    def _prefill(self, requests: list[EngineRequest]) -> None:
        for request in requests:
            if request.log_metrics:
                self.counters.prompt_tokens += len(request.prompt_ids)
            if request.logprobs.return_logprob and request.logprobs.logprob_start_len >= 0:
                self._prompt_logprobs(request)
        # max_new_tokens 0: without speculation SGLang takes its prefill-only path (no sample, no
        # output logprob); with it the prefill samples, the budget check drops the token and its
        # logprob is still sent (batch_result_processor.py, output_streamer.py max(len, 1)).
        ready = [r for r in requests if r.sampling.max_new_tokens > 0 or (self.config.speculative and r.logprobs.return_logprob)]
        for request in requests:
            if request not in ready:
                self._finish(request, {"type": "length", "length": 0})
        if not ready:
            return
        probs = self._adjust_next_rows(ready, self.target.probabilities_for_contexts([r.prompt_ids for r in ready]))
        tokens = self._sample_positions(ready, probs)
        for request, row_probs, token in zip(ready, probs, tokens, strict=True):
            request.first_token_at = time.time()
            if request.sampling.max_new_tokens == 0:
                self._keep_dropped_token_logprob(request, int(token), row_probs)
                self._finish(request, {"type": "length", "length": 0})
                continue
            self._commit(request, [int(token)], row_probs[None, :])
            self._notify(request)

    def _keep_dropped_token_logprob(self, request: EngineRequest, token: int, row_probs: np.ndarray) -> None:
        """The logprob of a token the budget dropped at once (max_new_tokens 0)."""
        temperature = 0.0 if request.sampling.greedy else request.sampling.temperature
        row = self.target.log_probs(row_probs[None, :], np.array([temperature]))[0]
        progress = request.computed
        progress.output_logprobs.append(float(row[token]))
        progress.output_top_logprobs.append(_top_logprobs(row, request.logprobs.top_logprobs_num))
        progress.logprob_only_token = token

    def _min_new_stop_ids(self, request: EngineRequest, vocab_size: int) -> list[int]:
        """The ids min_new_tokens masks: EOS and the request's stop ids (penaltylib/min_new_tokens.py:
        183-225). It only masks: stop strings still end the request."""
        if request.sampling.min_new_tokens <= 0:
            return []
        return sorted(t for t in {*self.config.eos_ids, *request.sampling.stop_token_ids} if 0 <= t < vocab_size)

    def _adjust_next_rows(self, requests: list[EngineRequest], probs: np.ndarray) -> np.ndarray:
        """Each request's next-token row (prefill and speculation-off decode) after its penalties,
        min_new_tokens and logit_bias (logit_adjust.py); `probs` rows follow `requests`."""
        out = probs
        for i, request in enumerate(requests):
            if not _adjusts_logits(request):
                continue
            row, vocab_size = probs[i : i + 1], probs.shape[-1]
            adjusted = adjust_rows(row, request.sampling, self._min_new_stop_ids(request, vocab_size), RowState.for_block(request, [], vocab_size))
            if adjusted is not row:  # copied only when some row changes
                out = probs.copy() if out is probs else out
                out[i : i + 1] = adjusted
        return out

    _mask_stop_ids = _adjust_next_rows  # the name tests/sglang_contract knows it by (min_new_tokens' mask)

    def _adjust_verify_block(self, request: EngineRequest, rows: np.ndarray, drafts: np.ndarray) -> np.ndarray:
        """A verify block's k+1 rows: row j's penalties count the output so far and drafts[:j], and
        its min_new_tokens length is the output length plus j, so every row is the row speculation
        off would see had it generated the same ids.  The fault arms break exactly this."""
        config = self.config
        state = RowState.for_block(request, drafts, self.vocab_size,
                                   relaxed_penalties=config.has_fault(fault_arms.RELAXED_PENALTIES),
                                   min_new_in_steps=config.has_fault(fault_arms.MIN_NEW_TOKENS_IN_STEPS))
        return adjust_rows(rows, request.sampling, self._min_new_stop_ids(request, self.vocab_size), state,
                           with_logit_bias=not config.has_fault(fault_arms.VERIFY_IGNORES_LOGIT_BIAS))

    def _prompt_logprobs(self, request: EngineRequest) -> None:
        """Logprobs of prompt[start+1:] given their prefixes (SGLang reports the first as null)."""
        start = request.logprobs.logprob_start_len
        prompt = request.prompt_ids
        width = self.target.tail_width
        padded_prompt = np.concatenate((np.full(width, -1, dtype=np.int64), prompt))
        # Row j holds the `width` ids before prompt[j]; padded counts come from a running sum.
        windows = np.lib.stride_tricks.sliding_window_view(padded_prompt[:-1], width)
        padded_before = np.concatenate(([0], np.cumsum(prompt >= self.tokenizer_length)))
        # Raw log_softmax(logits) whatever the request's temperature: SGLang computes input logprobs in
        # its logits processor, before the sampler's temperature, penalties and top-k/top-p (0.5.23
        # srt/layers/logprob_processor.py:475 InputLogprobProcessor, log_softmax at :734).
        temperature = 0.0
        if start >= len(prompt):
            return
        request.input_logprobs = [None]
        request.input_top_logprobs = [None]
        token_ids = [t for t in request.logprobs.token_ids_logprob or () if 0 <= t < self.target.vocab_size]
        request.input_token_ids_logprobs = [None] if request.logprobs.token_ids_logprob is not None else []
        positions = np.arange(start + 1, len(prompt))
        for chunk in np.array_split(positions, max(1, -(-len(positions) // 256))):
            if not chunk.size:
                continue
            probs = self.target.probabilities(windows[chunk], padded_before[chunk])
            logprobs = self.target.log_probs(probs, np.full(len(chunk), temperature))
            for row, j in zip(logprobs, chunk, strict=True):
                request.input_logprobs.append(float(row[prompt[j]]))
                request.input_top_logprobs.append(_top_logprobs(row, request.logprobs.top_logprobs_num))
                if request.logprobs.token_ids_logprob is not None:
                    request.input_token_ids_logprobs.append([(float(row[t]), t) for t in token_ids])

    def _sample_positions(self, requests: list[EngineRequest], probs: np.ndarray) -> np.ndarray:
        """One token per row from target probabilities: argmax for greedy rows, else sampled."""
        temperatures = np.array([0.0 if r.sampling.greedy else r.sampling.temperature for r in requests])
        tokens = probs.argmax(axis=1)
        sampled = np.flatnonzero(temperatures > 0)
        if sampled.size:
            tempered = self.target.tempered(probs[sampled], temperatures[sampled])
            tempered = renormalize_top_k_top_p(
                tempered,
                np.array([requests[i].sampling.top_k for i in sampled]),
                np.array([requests[i].sampling.top_p for i in sampled]),
            )
            tempered = apply_min_p(tempered, np.array([requests[i].sampling.min_p for i in sampled]))
            coins = np.array([requests[i].rng.random() for i in sampled])
            tokens[sampled] = sample_from(tempered, coins)
        return tokens

    # ----------------------------------------------------------------- decode
    def _decode_step(self, requests: list[EngineRequest]) -> None:
        self.counters.decode_iterations += 1
        if self.config.speculative:
            self._speculative_step(requests)
        else:
            probs = self._adjust_next_rows(requests, self.target.probabilities_for_contexts([r.context() for r in requests]))
            tokens = self._sample_positions(requests, probs)
            for request, row_probs, token in zip(requests, probs, tokens, strict=True):
                self._commit(request, [int(token)], row_probs[None, :])
                self._notify(request)

    def _speculative_step(self, requests: list[EngineRequest]) -> None:
        config = self.config
        steps = config.num_steps
        batch = len(requests)
        sampled_mask = np.array([config.use_rejection_sampling and not r.sampling.greedy for r in requests])
        temperatures = np.array([r.sampling.temperature if s else 0.0 for r, s in zip(requests, sampled_mask, strict=True)])
        coins = [self._coin_stream(r, batch).random(2 * steps + 1) if s else None for r, s in zip(requests, sampled_mask, strict=True)]
        width = self.target.tail_width
        base_tails = context_tails([r.context_tail(width) for r in requests], width)
        base_padded = np.array([r.padded_ids_in_context(self.tokenizer_length) for r in requests], dtype=np.int64)

        def tails_with(drafted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            extended = np.concatenate((base_tails, drafted), axis=1)[:, -width:]
            return extended, base_padded + (drafted >= self.tokenizer_length).sum(axis=1)

        drafts = np.zeros((batch, steps), dtype=np.int64)
        draft_probs = np.zeros((batch, steps, self.vocab_size), dtype=np.float32) if sampled_mask.any() else None
        for step in range(steps):
            raw = self.draft.probabilities(*tails_with(drafts[:, :step]))
            drafts[:, step] = raw.argmax(axis=1)
            if draft_probs is not None:
                rows = np.flatnonzero(sampled_mask)
                probs = self.draft.tempered(raw[rows], temperatures[rows])  # temperature only, as SGLang's draft
                draft_probs[rows, step] = probs
                step_coins = np.array([coins[i][step] for i in rows])
                drafts[rows, step] = sample_from(probs, step_coins)

        sampler_q = None
        if draft_probs is not None:
            if self.pool is not None:
                view = self.pool.replay_draft(draft_probs)
                sampler_q = view.copy() if config.copies_draft_probs else view
            else:
                sampler_q = draft_probs

        verify = [tails_with(drafts[:, :j]) for j in range(steps + 1)]
        verify_tails = np.stack([t for t, _ in verify], axis=1).reshape(batch * (steps + 1), width)
        verify_padded = np.stack([p for _, p in verify], axis=1).reshape(-1)
        target_probs = self.target.probabilities(verify_tails, verify_padded).reshape(batch, steps + 1, self.vocab_size)
        adjusted = [i for i, r in enumerate(requests) if _adjusts_logits(r)]
        if adjusted:
            target_probs = target_probs.copy()
            for i in adjusted:
                target_probs[i] = self._adjust_verify_block(requests[i], target_probs[i], drafts[i])
        if self.pool is not None and draft_probs is not None:
            self.pool.replay_verify(np.array([r.sequence_length for r in requests]))

        accepted = np.zeros(batch, dtype=np.int64)
        finals = np.zeros(batch, dtype=np.int64)
        fallback = np.zeros(batch, dtype=bool)
        greedy_rows = np.flatnonzero(~sampled_mask)
        if greedy_rows.size:
            argmax = lossy_greedy_argmax(target_probs[greedy_rows], config.lossy_greedy_gap)
            accepted[greedy_rows], finals[greedy_rows] = greedy_verify(argmax, drafts[greedy_rows])
        sampled_rows = np.flatnonzero(sampled_mask)
        if sampled_rows.size:
            result = self._rejection_sample(requests, sampled_rows, target_probs, sampler_q, drafts, coins, temperatures)
            accepted[sampled_rows] = result.accepted_drafts
            finals[sampled_rows] = result.final_ids
            fallback[sampled_rows] = result.fallback
            self.counters.sampler_guard_replacements += int(result.guard_replaced.sum())

        self._fold_spec_statistics(accepted, logged=sum(r.log_metrics for r in requests))
        for i, request in enumerate(requests):
            tokens = [int(t) for t in drafts[i, : accepted[i]]] + [int(finals[i])]
            if accepted[i] < steps and config.has_fault(fault_arms.LEAK_REJECTED_SLOT):
                tokens.append(0)  # the slot past the accept length, never written
            progress = request.computed
            progress.verify_ct += 1
            progress.num_correct_drafts += int(accepted[i])
            if len(progress.correct_drafts_histogram) <= accepted[i]:
                progress.correct_drafts_histogram.extend([0] * (int(accepted[i]) + 1 - len(progress.correct_drafts_histogram)))
            progress.correct_drafts_histogram[accepted[i]] += 1
            committed = self._commit(request, tokens, target_probs[i, : len(tokens)])
            if fallback[i] and committed == len(tokens):
                self.counters.sampler_fallback_emissions += 1
            self._notify(request)

    def _coin_stream(self, request: EngineRequest, batch: int) -> np.random.Generator:
        """The request's own generator (its sampling_seed's, or its arrival's), so a seed reproduces
        its answer whatever shares the step; the batch-ignores-seed fault arm draws a seeded request's
        coins from the engine's stream whenever it shares the verify step."""
        if batch > 1 and request.sampling.sampling_seed is not None and self.config.has_fault(fault_arms.BATCH_IGNORES_SEED):
            return self._shared_rng
        return request.rng

    def _rejection_sample(self, requests, rows, target_probs, sampler_q, drafts, coins, temperatures):
        config = self.config
        steps = config.num_steps
        flat = target_probs[rows].reshape(len(rows) * (steps + 1), self.vocab_size)
        probs = self.target.tempered(flat, np.repeat(temperatures[rows], steps + 1))
        probs = renormalize_top_k_top_p(
            probs,
            np.repeat([requests[i].sampling.top_k for i in rows], steps + 1),
            np.repeat([requests[i].sampling.top_p for i in rows], steps + 1),
            joint=not config.has_fault(fault_arms.VERIFY_TOP_K_RENORM_BEFORE_TOP_P),
        )
        if not config.has_fault(fault_arms.VERIFY_SKIPS_MIN_P):
            probs = apply_min_p(probs, np.repeat([requests[i].sampling.min_p for i in rows], steps + 1))
        probs = probs.reshape(len(rows), steps + 1, self.vocab_size)
        q = sampler_q[rows]
        nonfinite = int(np.count_nonzero(~np.isfinite(q)))
        counters = self.counters
        counters.sampler_batches += 1
        counters.draft_probs_last_batch_nonfinite = nonfinite
        counters.draft_probs_nonfinite_entries += nonfinite
        counters.draft_probs_nonfinite_batches += int(nonfinite > 0)
        accept_coins = np.array([coins[i][steps : 2 * steps] for i in rows])
        final_coins = np.array([coins[i][2 * steps] for i in rows])
        if self.kernel_sampler is not None:
            return self.kernel_sampler.sample(probs, q, drafts[rows], accept_coins, final_coins)
        return chain_rejection_sample(probs, q, drafts[rows], accept_coins, final_coins, self.guards, self.config.bias_accept,
                                      self.config.accept_inflation)

    def _fold_spec_statistics(self, accepted: np.ndarray, *, logged: int) -> None:
        """SGLang's spec statistics; `logged`: the batch's requests that count in sglang:spec_verify_calls_total (a
        per-request total at finish in SGLang, so not a health check's), the folded statistics count every row."""
        c = self.counters
        c.verify_calls += logged
        c.drafted_tokens += len(accepted) * self.config.num_steps
        c.accepted_drafts += int(accepted.sum())
        c.interval_accept_tokens += int(accepted.sum()) + len(accepted)
        c.interval_correct_drafts += int(accepted.sum())
        c.interval_forward_ct += len(accepted)
        if c.decode_iterations % self.config.decode_log_interval == 0 and c.interval_forward_ct:
            c.last_interval_accept_length = c.interval_accept_tokens / c.interval_forward_ct
            c.last_interval_accept_rate = c.interval_correct_drafts / (c.interval_forward_ct * self.config.num_steps)
            c.total_accept_tokens += c.interval_accept_tokens
            c.total_forward_ct += c.interval_forward_ct
            c.interval_accept_tokens = c.interval_forward_ct = c.interval_correct_drafts = 0

    # ----------------------------------------------------------------- commit and finish
    def _commit(self, request: EngineRequest, tokens: list[int], probs: np.ndarray) -> int:
        """Append one step's accepted tokens, then apply SGLang's finish rules to the whole run and
        keep the ids through the finish (`Req.update_finish_state`, `output_ids_through_stop`);
        return how many were kept."""
        progress = request.computed
        if progress.finish_reason is not None:
            return 0
        start = len(progress.output_ids)
        progress.output_ids.extend(tokens)
        finish, finished_len = self._finish_of_step(request, len(tokens))
        del progress.output_ids[finished_len:]
        kept = progress.output_ids[start:]
        temperature = 0.0 if request.sampling.greedy else request.sampling.temperature
        if request.logprobs.return_logprob and kept:
            logprob_rows = self.target.log_probs(probs[: len(kept)], np.full(len(kept), temperature))
            for position, token in enumerate(kept):
                progress.output_logprobs.append(float(logprob_rows[position, token]))
                progress.output_top_logprobs.append(_top_logprobs(logprob_rows[position], request.logprobs.top_logprobs_num))
        progress.padded_ids += sum(token >= self.tokenizer_length for token in kept)
        if kept:
            progress.step_last_ids.append(kept[-1])
        if request.log_metrics:
            self.counters.generation_tokens += len(kept)
        if finish is not None:
            self._finish(request, finish)
        return len(kept)

    def _finish_of_step(self, request: EngineRequest, new_count: int) -> tuple[dict | None, int]:
        """(finish reason or None, output ids to keep) after a step added `new_count` ids.

        SGLang's order (schedule_batch.py `update_finish_state`): stop strings, in list order, over
        a tail decoded with special tokens; then the first EOS/stop id of the step; then the length
        budget. A stop located past the budget becomes a length finish at the budget
        (`_cap_finished_len_at_max_new_tokens`). min_new_tokens plays no part here: it masks the ids
        before they are drawn (logit_adjust.py)."""
        sampling = request.sampling
        ids = request.computed.output_ids
        # The fault arm searches only the window ending at the block's last id, as if it were the only new one.
        found = self._stop_string_finish(request, 1 if self.config.has_fault(fault_arms.STOP_STRING_AT_BLOCK_END_ONLY) else new_count)
        if found is None and not sampling.ignore_eos:
            first_new = len(ids) - new_count
            for offset, token in enumerate(ids[first_new:]):
                if token in self.config.eos_ids or token in sampling.stop_token_ids:
                    found = ({"type": "stop", "matched": token}, first_new + offset + 1)
                    break
        if found is not None:
            reason, finished_len = found
            if finished_len > sampling.max_new_tokens:
                return {"type": "length", "length": sampling.max_new_tokens}, sampling.max_new_tokens
            return reason, finished_len
        if len(ids) >= sampling.max_new_tokens:
            return {"type": "length", "length": sampling.max_new_tokens}, sampling.max_new_tokens
        return None, len(ids)

    def _stop_string_finish(self, request: EngineRequest, new_count: int) -> tuple[dict, int] | None:
        """SGLang's stop-string check (`_check_str_based_finish`): the first stop string, in list
        order, found in the last stop_str_max_len + 1 (+ new_count - 1) ids decoded on their own
        with special tokens (`tail_str`); the kept length is the fewest ids of that window whose
        text contains it (`_locate_str_stop_finished_len`)."""
        sampling = request.sampling
        if not sampling.stop:
            return None
        ids = request.computed.output_ids
        longest = sampling.stop_str_max_len or max(len(stop) for stop in sampling.stop)
        tail_len = min(longest + 1 + max(new_count - 1, 0), len(ids))
        window_start = len(ids) - tail_len
        window = ids[window_start:]
        tail = self.decode_text(window, False, clamp=False)
        for stop in sampling.stop:
            if stop and stop in tail:
                finished_len = len(ids)
                for count in range(max(1, len(window) - new_count + 1), len(window)):
                    if stop in self.decode_text(window[:count], False, clamp=False):
                        finished_len = window_start + count
                        break
                return {"type": "stop", "matched": stop}, finished_len
        return None

    def _finish(self, request: EngineRequest, reason: dict) -> None:
        request.computed.finish_reason = reason
        if request.log_metrics:
            self.counters.requests_finished += 1
        self._notify(request)


def _adjusts_logits(request: EngineRequest) -> bool:
    """Whether the request's rows need logit_adjust at all (most requests: no)."""
    sampling = request.sampling
    return sampling.penalized or bool(sampling.logit_bias) or sampling.min_new_tokens > 0


def _top_logprobs(row: np.ndarray, count: int) -> list[tuple[float, int]]:
    """The `count` most likely ids of a logprob row, in descending order."""
    if count <= 0:
        return []
    count = min(count, len(row))
    top = np.argpartition(-row, count - 1)[:count]
    top = top[np.argsort(-row[top], kind="stable")]
    return [(float(row[i]), int(i)) for i in top]
