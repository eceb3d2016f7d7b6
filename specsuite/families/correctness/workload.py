"""The correctness workload: generate over a grid of sampling cases and run every detector.

For each case (temperature, top_p) the workload flushes the server, sends the profile's prompts
as typed requests with logprobs (`specsuite.server.protocol`; ids arrive twice and can be cross-checked),
scans each response as it finishes, streams a record per request to the caller's sink, and keeps
the aggregates: detector totals with Clopper–Pearson bounds, per-request accept lengths and the
server-wide accept length read after the case (only when the flush happened: a refused flush is a
warning in `CaseResult.warnings`, not an error).  pytest suites and the CLI both call this.

Requests go through a `specsuite.server.faults.FaultGuard`: a failed request becomes an error record with its
error class and the request itself, and once the guard's policy stops the run the requests not yet
sent are recorded as skipped (see specsuite/server/faults.py for the rules).
"""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any, Callable

from specsuite.errors import SpecsuiteError
from specsuite.families.correctness.acceptance import request_accept_length, server_accept_length
from specsuite.families.correctness.detectors import DetectorConfig, DetectorHits, aggregate, scan_generation
from specsuite.families.correctness.prompts import PromptItem
from specsuite.families.correctness.records import DetectorTotal
from specsuite.server import kinds
from specsuite.server.cache_flush import flush_before_measurement
from specsuite.server.counters import counter_deltas
from specsuite.server.faults import FaultGuard, Outcome, RunStopped, classify, failure_record
from specsuite.server.generation import Generation
from specsuite.server.meta_info import MetaInfo
from specsuite.server.protocol import GenerationRequest, Sampling, ServerClient, request_record
from specsuite.server.sampling_pins import pinned
from specsuite.server.vocab import VocabInfo

EXAMPLE_WINDOW = 8  # ids either side of an offending position quoted in failure messages
# The previous case's requests have all returned, but SGLang may still be retiring them.
FLUSH_RETRY_S = 5.0
SERVER_ACCEPT_UNMEASURED = "server-wide accept length after flush not measured for this case"


@dataclass(frozen=True)
class Profile:
    """How much to generate per case."""

    name: str
    num_prompts: int
    max_new_tokens: int
    concurrency: int


PROFILES = {
    "smoke": Profile("smoke", num_prompts=24, max_new_tokens=128, concurrency=24),  # a case in one batch
    "nightly": Profile("nightly", num_prompts=96, max_new_tokens=512, concurrency=16),
}


def _format_number(value: float) -> str:
    return f"{value:g}" if value != int(value) else f"{int(value)}"


@dataclass(frozen=True)
class SamplingCase:
    """One point of the sampling grid."""

    temperature: float
    top_p: float

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def case_id(self) -> str:
        return f"t={_format_number(self.temperature)}-top_p={_format_number(self.top_p)}"


def sampling_grid(temperatures: list[float], top_ps: list[float]) -> list[SamplingCase]:
    """The cross product, except that T=0 runs once: greedy decoding ignores top_p."""
    cases: list[SamplingCase] = []
    for temperature in temperatures:
        for top_p in ([max(top_ps)] if temperature == 0 else top_ps):
            cases.append(SamplingCase(temperature, top_p))
    return cases


@dataclass
class CaseResult:
    """What one case produced: every generation's hits, the totals and the acceptance numbers."""

    case: SamplingCase
    profile: str
    seed: int
    generations: list[Generation] = field(default_factory=list)
    hits: list[DetectorHits] = field(default_factory=list)
    accept_lengths: list[float] = field(default_factory=list)
    accept_rates: list[float] = field(default_factory=list)
    server_accept_length: float | None = None
    errors: list[str] = field(default_factory=list)
    error_classes: Counter[str] = field(default_factory=Counter)
    skipped: int = 0  # requests not sent because the fault policy stopped the run
    stopped: str | None = None  # the policy's stop reason, when it stopped during this case
    after_case_error: str | None = None  # reading the server's counters after the case failed
    wall_time_s: float = 0.0
    server_counters: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # one line each, e.g. a refused flush

    @property
    def totals(self) -> dict[str, DetectorTotal]:
        return aggregate(self.hits)

    def total(self, detector: str) -> DetectorTotal:
        """A detector's totals; one that found nothing in nothing when it did not run."""
        return self.totals.get(detector) or DetectorTotal()

    @property
    def generated_tokens(self) -> int:
        return sum(g.generated_token_count for g in self.generations)

    def count(self, detector: str) -> int:
        return self.total(detector).count

    def example(self, detector: str) -> str:
        """One offending request, quoted: prompt hash, position, ids around it, text window."""
        for generation, hits in zip(self.generations, self.hits, strict=False):
            result = hits.results.get(detector)
            if result is None or not result.count:
                continue
            position = result.positions[0] if result.positions else 0
            ids = generation.output_ids or []
            window = ids[max(0, position - EXAMPLE_WINDOW) : position + EXAMPLE_WINDOW + 1]
            text = generation.text
            where = min(len(text), int(len(text) * position / max(len(ids), 1)))
            snippet = text[max(0, where - 60) : where + 60]
            return f"prompt {generation.prompt_hash} position {position} ids {window} text {snippet!r}"
        return "no offending request"

    def to_dict(self) -> dict[str, Any]:
        return {
            "case_id": self.case.case_id,
            "temperature": self.case.temperature,
            "top_p": self.case.top_p,
            "profile": self.profile,
            "seed": self.seed,
            "n_requests": len(self.generations),
            "n_errors": len(self.errors),
            "errors": self.errors[:20],
            "error_classes": dict(sorted(self.error_classes.items())),
            "n_skipped": self.skipped,
            "stopped": self.stopped,
            "after_case_error": self.after_case_error,
            "warnings": self.warnings,
            "n_tokens": self.generated_tokens,
            "wall_time_s": self.wall_time_s,
            "detectors": {name: total.to_dict() for name, total in self.totals.items()},
            "server_counters": self.server_counters,
            "acceptance": {
                "per_request": self.accept_lengths,
                "mean": sum(self.accept_lengths) / len(self.accept_lengths) if self.accept_lengths else None,
                "accept_rates": self.accept_rates,
                "server_after_flush": self.server_accept_length,
            },
        }


def build_request(prompt: PromptItem, case: SamplingCase, max_new_tokens: int, sampling_seed: int) -> GenerationRequest:
    """One request that returns ids and logprobs together (so the two id sources can be cross-checked)."""
    # Every field a server could default is sent: the padded-row and text judges compare with the plain softmax.
    sampling = pinned(Sampling(temperature=case.temperature, top_p=case.top_p, max_new_tokens=max_new_tokens, seed=sampling_seed))
    return GenerationRequest(prompt=prompt.prompt, sampling=sampling, logprobs=True)


def run_case(
    client: ServerClient,
    vocab: VocabInfo,
    case: SamplingCase,
    prompts: list[PromptItem],
    profile: Profile,
    *,
    seed: int = 0,
    record_sink: Callable[[dict[str, Any]], None] | None = None,
    detector_config: DetectorConfig | None = None,
    guard: FaultGuard | None = None,
) -> CaseResult:
    """Generate the profile's requests for one case and scan them as they finish.

    `guard` carries the fault policy across cases (a fresh default one when None). Raises
    `RunStopped` at once when the policy has already stopped the run.
    """
    guard = guard if guard is not None else FaultGuard()
    result = CaseResult(case=case, profile=profile.name, seed=seed)
    chosen = [prompts[i % len(prompts)] for i in range(profile.num_prompts)]
    guard.check()
    try:
        flush = flush_before_measurement(client, retry_s=FLUSH_RETRY_S)  # so the server-wide accept length covers this case only
        metrics_before = client.metrics_text()
    except SpecsuiteError as exc:
        guard.record_failure(exc)
        raise
    if not flush.flushed:
        result.warnings.append(f"case {case.case_id}: {flush.warning(SERVER_ACCEPT_UNMEASURED)}")
    started = time.perf_counter()

    def one(index: int, prompt: PromptItem) -> tuple[int, PromptItem, GenerationRequest, Outcome | SpecsuiteError]:
        request = build_request(prompt, case, profile.max_new_tokens, seed * 100_003 + index)
        try:
            # Sending and parsing apart: the guard retries the sending and classifies an unusable answer.
            outcome = guard.run(lambda: client.send_request(request), lambda sent: client.parse_answer(request, sent).generation)
            return index, prompt, request, outcome
        except SpecsuiteError as exc:
            return index, prompt, request, exc

    pool = ThreadPoolExecutor(max_workers=profile.concurrency)
    try:
        futures = [pool.submit(one, i, p) for i, p in enumerate(chosen)]
        for future in as_completed(futures):
            index, prompt, request, outcome = future.result()
            context = {"case_id": case.case_id, "request_index": index, "prompt_id": prompt.id}
            if isinstance(outcome, RunStopped):
                result.skipped += 1
                if record_sink:
                    record_sink({**context, "status": "skipped", "reason": str(outcome)})
                continue
            if isinstance(outcome, SpecsuiteError):
                result.errors.append(str(outcome))
                result.error_classes[classify(outcome).value] += 1
                if record_sink:
                    record_sink(failure_record(outcome, request_record(request), **context))
                continue
            generation = outcome.value
            hits = scan_generation(generation, vocab, detector_config)
            accept = request_accept_length(generation.meta_info)
            result.generations.append(generation)
            result.hits.append(hits)
            if accept is not None:
                result.accept_lengths.append(accept)
            rate = MetaInfo.parse(generation.meta_info).spec_accept_rate
            if isinstance(rate, (int, float)):
                result.accept_rates.append(float(rate))
            if record_sink:
                record_sink({**_record(case, index, prompt, generation, hits, accept), "attempts": outcome.attempts})
    finally:
        # On Ctrl-C/SIGTERM only the requests in flight finish; queued ones are never sent.
        pool.shutdown(wait=True, cancel_futures=True)
    result.wall_time_s = time.perf_counter() - started
    result.stopped = guard.stop_reason
    if result.stopped is None:
        try:
            result.server_counters = counter_deltas(metrics_before, client.metrics_text(), kinds.all_counters())
            # Without the flush the server-wide value mixes in earlier traffic: not this case's.
            if flush.flushed:
                result.server_accept_length = server_accept_length(client.server_info())
        except SpecsuiteError as exc:
            guard.record_failure(exc)
            result.after_case_error = str(exc)
    return result


def _record(case: SamplingCase, index: int, prompt: PromptItem, generation: Generation, hits: DetectorHits, accept: float | None) -> dict[str, Any]:
    """The per-request JSONL record: what was asked, what came back, what the detectors saw."""
    meta = generation.meta_info
    return {
        "case_id": case.case_id,
        "status": "ok",
        "request_index": index,
        "prompt_id": prompt.id,
        "prompt_kind": prompt.kind,
        "prompt_hash": generation.prompt_hash,
        "params": generation.params,
        "output_ids": generation.output_ids,
        "text": generation.text,
        "finish_reason": generation.finish_reason,
        "completion_tokens": generation.completion_tokens,
        "detector_hits": {name: r.count for name, r in hits.results.items() if r.count},
        "accept_length": accept,
        "spec": {k: meta[k] for k in ("spec_verify_ct", "spec_accept_rate", "spec_num_correct_drafts", "spec_num_proposed_drafts") if k in meta},
    }
