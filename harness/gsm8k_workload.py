"""GSM8K against a live server, with the correctness detectors run on every answer.

`run_gsm8k` scores answers; this wrapper gives it the server's `/generate`, scans each response
for the seed's garbage (invalid and fallback ids, stray `!`, fragments) as it arrives, flushes the
server first so the server-wide accept length covers this run only, and returns one JSON-friendly
dict per temperature for results.json (`workloads.gsm8k["t=<T>"]`).
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from harness.acceptance import server_accept_length
from harness.detectors import DetectorHits, aggregate, scan_generation
from harness.generation import Generation
from harness.sglang_client import SGLangClient
from harness.vocab import VocabInfo
from harness.workloads.gsm8k import GSM8KItem, run_gsm8k


def temperature_key(temperature: float) -> str:
    return f"t={temperature:g}"


def run_gsm8k_on_server(
    client: SGLangClient,
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
) -> dict[str, Any]:
    """One GSM8K run at one temperature; the result dict carries scores and detector totals."""
    hits: list[DetectorHits] = []
    lock = threading.Lock()

    def generate_and_scan(payload: dict[str, Any]) -> dict[str, Any]:
        response = client.generate(payload)
        generation = Generation.from_sglang(payload, response)
        found = scan_generation(generation, vocab)
        with lock:
            hits.append(found)
        return response

    client.flush_cache()
    result = run_gsm8k(
        generate_and_scan, items, num_shots=num_shots, num_questions=num_questions, temperature=temperature, top_p=top_p,
        parallel=parallel, seed=seed, shots_from_eval=shots_from_eval, record_sink=record_sink, progress=progress,
        server_accept_length=lambda: server_accept_length(client.server_info()),
    ).to_dict()
    result["temperature"] = temperature
    result["detectors"] = aggregate(hits)
    return result
