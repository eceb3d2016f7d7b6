"""The engine in its own process, behind the interface the HTTP layer uses (as SGLang runs its
scheduler apart from its tokenizer manager).

Used with step emulation. In one process the engine's numpy work, the step publisher and the
HTTP thread share one GIL: a chunk due at a step's end waits behind the next steps' compute, and
on a small machine the emulated clock is lost in that jitter. Here the engine computes in a
forked child and sends each result, tagged with the deadline its step got there, over a pipe; in
the HTTP process a receiver thread files the results under their requests and the step publisher
makes them visible at their deadlines (`time.perf_counter` is CLOCK_MONOTONIC on Linux, one
clock for both processes).

Wire messages, parent to child: ("submit", key, prompt_ids, sampling, logprobs, arrival_index,
rng, log_metrics), ("abort", key), ("flush", token), ("stop",). Child to parent: first ("started", sampler
identity) or ("failed", one-line reason), then ("step", deadline or None, records, (counters,
running, waiting) or None) and ("flushed", token, accepted).
"""

from __future__ import annotations

import itertools
import multiprocessing
import signal
import threading
import time
from typing import Any, Callable

from specsuite.errors import SpecsuiteError
from specsuite.kernel_loading.sglang_wheel import PIP_TIMEOUT_S
from specsuite.refserver.engine import Engine, EngineConfig, EngineCounters
from specsuite.refserver.engine_request import EngineRequest
from specsuite.refserver.models import DegeneratingModel
from specsuite.refserver.step_clock import StepMarks, StepPublisher, publish_and_notify

FLUSH_REPLY_TIMEOUT_S = 5.0
# The child sends its counters with a step at most this often (and always with a finish or an
# immediate publication): pickling them every step cost about a tenth of a 2.56 ms step.
COUNTERS_INTERVAL_S = 0.010
STOP_TIMEOUT_S = 5.0
# The child builds the engine, which may fetch a release's kernel from the package index first.
STARTUP_TIMEOUT_S = PIP_TIMEOUT_S + 60.0


class EngineProcess:
    """Parent side: submit, abort and flush go to the child; results come back and are published
    here, on the step clock."""

    def __init__(self, config: EngineConfig, target: DegeneratingModel, draft: DegeneratingModel,
                 decode_text: Callable[[list[int], bool], str]) -> None:
        self.config = config
        self.counters = EngineCounters()
        self._queue_lengths = (0, 0)
        context = multiprocessing.get_context("fork")  # the child shares the trained tables copy-on-write
        self._commands_in, self._commands = context.Pipe(duplex=False)
        self._events, self._events_out = context.Pipe(duplex=False)
        self._child = context.Process(target=_child_main, name="refserver-engine",
                                      args=(config, target, draft, decode_text, self._commands_in, self._events_out,
                                            (self._commands, self._events)), daemon=True)
        self._live: dict[int, EngineRequest] = {}
        self._keys = itertools.count()
        self._send_lock = threading.Lock()
        self._publisher = StepPublisher()
        self._receiver = threading.Thread(target=self._receive, name="refserver-engine-results", daemon=True)
        self._flush_replies: dict[int, tuple[threading.Event, list[bool]]] = {}
        self.sampler_identity: dict[str, Any] = {}

    # ----------------------------------------------------------------- the Engine interface
    def start(self) -> None:
        self._child.start()
        self._commands_in.close()  # the child's ends: EOF reaches each side when the other exits
        self._events_out.close()
        self._await_child_engine()
        self._publisher.start()
        self._receiver.start()

    def _await_child_engine(self) -> None:
        """The child's first message: its engine is built (and says which sampler it loaded), or
        it says in one line why not; either way before any request is sent."""
        try:
            if not self._events.poll(STARTUP_TIMEOUT_S):
                raise SpecsuiteError(f"the engine process did not start in {STARTUP_TIMEOUT_S:.0f} s")
            message = self._events.recv()
        except (EOFError, OSError):
            message = ("failed", "the engine process exited while starting")
        if message[0] != "started":
            self._child.join(timeout=STOP_TIMEOUT_S)
            raise SpecsuiteError(message[1])
        self.sampler_identity = message[1]

    def stop(self) -> None:
        try:
            self._send(("stop",))
        except OSError:
            pass
        self._child.join(timeout=STOP_TIMEOUT_S)
        if self._child.is_alive():
            self._child.terminate()
            self._child.join(timeout=STOP_TIMEOUT_S)
        self._publisher.stop()

    def is_alive(self) -> bool:
        return self._child.is_alive() and self._receiver.is_alive()

    def submit(self, request: EngineRequest) -> None:
        request.created_at = time.time()
        key = next(self._keys)
        self._live[key] = request
        request.engine_key = key
        self._send(("submit", key, request.prompt_ids, request.sampling, request.logprobs, request.arrival_index, request.rng,
                    request.log_metrics))

    def abort(self, request: EngineRequest) -> None:
        request.aborted = True
        if request.engine_key is not None:
            self._send(("abort", request.engine_key))

    def flush_spec_statistics(self) -> bool:
        """Ask the child (it alone knows whether requests run); False if it does not answer."""
        token = next(self._keys)
        done, answer = threading.Event(), []
        self._flush_replies[token] = (done, answer)
        try:
            self._send(("flush", token))
            done.wait(timeout=FLUSH_REPLY_TIMEOUT_S)
        finally:
            self._flush_replies.pop(token, None)
        return bool(answer and answer[0])

    def average_accept_length(self) -> float | None:
        c = self.counters
        return c.total_accept_tokens / c.total_forward_ct if c.total_forward_ct else None

    def queue_lengths(self) -> tuple[int, int]:
        """(running, waiting) as the child last reported them."""
        return self._queue_lengths

    # ----------------------------------------------------------------- results
    def _send(self, message: tuple) -> None:
        with self._send_lock:
            self._commands.send(message)

    def _receive(self) -> None:
        while True:
            try:
                message = self._events.recv()
            except (EOFError, OSError):
                return  # the child is gone; is_alive() says so to /health
            if message[0] == "flushed":
                _, token, accepted = message
                waiter = self._flush_replies.get(token)
                if waiter is not None:
                    waiter[1].append(accepted)
                    waiter[0].set()
                continue
            _, deadline, records, status = message
            if status is not None:
                counters, running, waiting = status
                self.counters = EngineCounters(**counters)
                self._queue_lengths = (running, waiting)
            marks = self._file_results(records)
            if deadline is None:
                publish_and_notify(marks)
            else:
                self._publisher.schedule(deadline, marks)

    def _file_results(self, records: list[tuple]) -> StepMarks:
        """Append each record's new outputs to its request's computed progress."""
        marks = []
        for key, mark, ids, logprobs, top_logprobs, prefill in records:
            request = self._live.get(key)
            if request is None:
                continue
            progress = request.computed
            progress.output_ids.extend(ids)
            progress.output_logprobs.extend(logprobs)
            progress.output_top_logprobs.extend(top_logprobs)
            if prefill is not None:
                request.first_token_at, request.input_logprobs, request.input_top_logprobs, request.input_token_ids_logprobs = prefill
            if mark.finish_reason is not None:
                del self._live[key]
            marks.append((request, mark))
        return marks


class _ResultSender:
    """Child side: the engine's publisher. Sends each step's new outputs with the deadline the
    step got (None: publish at once)."""

    def __init__(self, events: Any, live: dict[int, EngineRequest]) -> None:
        self._events = events
        self._live = live
        self._lock = threading.Lock()  # the engine thread and the command thread both send
        self._sent: dict[int, int] = {}  # per request key: output ids sent so far
        self._status_sent_at = 0.0
        self.status: Callable[[], tuple[dict, int, int]] = lambda: ({}, 0, 0)

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def publish_now(self, marks: StepMarks) -> None:
        self._send_step(None, marks)

    def schedule(self, deadline: float, marks: StepMarks) -> None:
        self._send_step(deadline, marks)

    def send(self, message: tuple) -> None:
        with self._lock:
            self._events.send(message)

    def _send_step(self, deadline: float | None, marks: StepMarks) -> None:
        records = []
        finishes = False
        for request, mark in marks:
            key = request.engine_key
            first = key not in self._sent
            if first and key not in self._live:
                continue  # an older step of a request already finished (aborted meanwhile)
            sent = self._sent.get(key, 0)
            upto = max(sent, mark.output_count)
            logprobs_upto = max(upto, mark.logprob_count)  # one more only for a max_new_tokens 0 finish
            progress = request.computed
            prefill = (request.first_token_at, request.input_logprobs, request.input_top_logprobs,
                       request.input_token_ids_logprobs) if first else None
            records.append((key, mark, progress.output_ids[sent:upto], progress.output_logprobs[sent:logprobs_upto],
                            progress.output_top_logprobs[sent:logprobs_upto], prefill))
            self._sent[key] = upto
            if mark.finish_reason is not None:
                finishes = True
                self._sent.pop(key, None)
                self._live.pop(key, None)
        status = None
        now = time.perf_counter()
        if deadline is None or finishes or now - self._status_sent_at >= COUNTERS_INTERVAL_S:
            status, self._status_sent_at = self.status(), now
        self.send(("step", deadline, records, status))


def _child_main(config: EngineConfig, target: DegeneratingModel, draft: DegeneratingModel,
                decode_text: Callable[[list[int], bool], str], commands: Any, events: Any, parent_ends: tuple[Any, Any]) -> None:
    """Run the engine; serve commands until "stop" or until the HTTP process goes away."""
    for end in parent_ends:
        end.close()  # else our own copy of the parent's sending end would keep EOF from arriving
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the process group; the parent stops us
    live: dict[int, EngineRequest] = {}
    sender = _ResultSender(events, live)
    try:
        engine = Engine(config, target, draft, decode_text, publisher=sender)
    except SpecsuiteError as exc:
        sender.send(("failed", str(exc)))
        return
    sender.send(("started", engine.sampler_identity))
    # A shallow copy (asdict's deep copy cost tens of microseconds every step); `extra` is copied too.
    sender.status = lambda: ({**vars(engine.counters), "extra": dict(engine.counters.extra)}, len(engine.running), len(engine.waiting))
    engine.start()
    try:
        while True:
            try:
                message = commands.recv()
            except (EOFError, OSError):
                return
            kind = message[0]
            if kind == "submit":
                _, key, prompt_ids, sampling, logprobs, arrival_index, rng, log_metrics = message
                request = EngineRequest(str(key), prompt_ids, sampling, logprobs, arrival_index, rng, log_metrics=log_metrics)
                request.engine_key = key
                live[key] = request
                engine.submit(request)
            elif kind == "abort":
                request = live.get(message[1])
                if request is not None:
                    engine.abort(request)
            elif kind == "flush":
                sender.send(("flushed", message[1], engine.flush_spec_statistics()))
            elif kind == "stop":
                return
    finally:
        engine.stop()
