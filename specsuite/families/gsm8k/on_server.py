"""GSM8K against a live server, with the correctness detectors run on every answer.

`run_gsm8k` scores answers; this wrapper gives it the server's typed generation (any server kind
behind `specsuite.server.protocol`), scans each answer
for the garbage a corrupted sampler emits (invalid and fallback ids, stray `!`, fragments) as it arrives, judges the
padded rows other than the fallback against the model's own mass (correctness.padded_rows.judge_answers), flushes the
server first so the server-wide accept length covers this run only (a refused flush leaves that
value out and adds a line to the result's `warnings`), and returns one JSON-friendly dict per
temperature for results.json (one entry of the list `workloads.gsm8k`; callers key their runs by
`temperature_key`). Requests go through a `specsuite.server.faults.FaultGuard` (retries for 429/503,
error classes, the stop rules).
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from specsuite.errors import SpecsuiteError
from specsuite.families.correctness.acceptance import server_accept_length
from specsuite.families.correctness.detectors import DetectorHits, aggregate, scan_generation
from specsuite.families.correctness.padded_rows import judge_answers
from specsuite.families.gsm8k import GSM8KItem, run_gsm8k
from specsuite.server.cache_flush import flush_before_measurement
from specsuite.server.faults import FaultGuard
from specsuite.server.generation import Generation
from specsuite.server.protocol import GenerationRequest, ServerClient
from specsuite.server.vocab import VocabInfo

FLUSH_RETRY_S = 5.0  # earlier requests have returned; SGLang may still be retiring them


def temperature_key(temperature: float) -> str:
    return f"t={temperature:g}"


def run_gsm8k_on_server(
    client: ServerClient,
    vocab: VocabInfo,
    items: list[GSM8KItem],
    *,
    temperature: float,
    num_questions: int | None,
    num_shots: int = 5,
    parallel: int = 16,
    seed: int = 0,
    shots_from_eval: bool = False,
    top_p: float = 1.0,
    record_sink: Callable[[dict[str, Any]], None] | None = None,
    progress: bool = False,
    guard: FaultGuard | None = None,
    alpha: float = 0.001,
) -> dict[str, Any]:
    """One GSM8K run at one temperature; the result dict carries scores and detector totals.
    `guard` carries the fault policy across runs (a fresh default one when None)."""
    guard = guard if guard is not None else FaultGuard()
    hits: list[DetectorHits] = []
    answers: list[Generation] = []  # for the padded-row judgement (scored only when a judged padded id was drawn)
    lock = threading.Lock()

    def generate_and_scan(request: GenerationRequest) -> Generation:
        # Sending and parsing apart: the guard retries the sending and classifies an unusable answer.
        generation = guard.run(lambda: client.send_request(request), lambda sent: client.parse_answer(request, sent).generation).value
        found = scan_generation(generation, vocab)
        with lock:
            hits.append(found)
            answers.append(generation)
        return generation

    guard.check()
    try:
        flush = flush_before_measurement(client, retry_s=FLUSH_RETRY_S)
    except SpecsuiteError as exc:
        guard.record_failure(exc)
        raise
    result = run_gsm8k(
        generate_and_scan, items, num_shots=num_shots, num_questions=num_questions, temperature=temperature, top_p=top_p,
        parallel=parallel, seed=seed, shots_from_eval=shots_from_eval, record_sink=record_sink, progress=progress,
        # Without the flush the server-wide value mixes in earlier traffic: not this run's.
        server_accept_length=(lambda: _accept_length_after(client, guard)) if flush.flushed else None,
    ).to_dict()
    result["temperature"] = temperature
    result["warnings"] = [] if flush.flushed else [
        f"GSM8K {temperature_key(temperature)}: {flush.warning('server-wide accept length after flush not measured for this run')}"]
    result["detectors"] = {name: total.to_dict() for name, total in aggregate(hits).items()}
    # Padded rows other than the fallback carry a little model mass: judged against it, as the correctness suite does.
    result["padded_rows"] = judge_answers(client, vocab, answers, temperature=temperature, top_p=top_p, alpha=alpha).to_dict()
    return result


def _accept_length_after(client: ServerClient, guard: FaultGuard) -> float | None:
    """The server-wide accept length after the run; None once the server is down or unreadable."""
    if guard.stopped:
        return None
    try:
        return server_accept_length(client.server_info())
    except SpecsuiteError as exc:
        guard.record_failure(exc)
        return None
