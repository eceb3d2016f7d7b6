"""One line of the serving benchmark's JSONL file (specsuite.families.bench.record.build_record), typed: the
fields its table and the pytest session's summary read, by bench_serving's names; every other key stays in
``extra`` and the line's key order is kept, so ``to_dict`` gives the line back as written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specsuite.results.types import Record

# The figures each latency block of the table prints, as the line names them: f"{stat}_{metric}_ms".
LATENCY_STATS = ("mean", "median", "p90", "p95", "p99")


@dataclass
class BenchLine(Record):
    """A benchmark run's JSONL line: run parameters, totals, latency figures (ms), detail arrays, status."""

    # run parameters (bench_serving's flag names); request_rate inf is written "inf"
    backend: str | None = None
    request_rate: float | str | None = None
    max_concurrency: int | None = None
    status: str | None = None  # complete | interrupted
    run: dict[str, Any] | None = None  # the run's other settings
    warnings: list[str] | None = None
    # totals and throughputs
    completed: int | None = None
    failed: int | None = None
    duration: float | None = None
    total_input_tokens: int | None = None
    total_output_tokens: int | None = None
    total_output_tokens_retokenized: int | None = None
    request_throughput: float | None = None
    input_throughput: float | None = None
    output_throughput: float | None = None
    max_output_tokens_per_s: float | None = None
    max_concurrent_requests: int | None = None
    total_throughput: float | None = None
    concurrency: float | None = None
    accept_length: float | None = None
    mean_request_accept_length: float | None = None
    # latency figures in ms
    mean_e2e_latency_ms: float | None = None
    median_e2e_latency_ms: float | None = None
    p90_e2e_latency_ms: float | None = None
    p95_e2e_latency_ms: float | None = None
    p99_e2e_latency_ms: float | None = None
    mean_ttft_ms: float | None = None
    median_ttft_ms: float | None = None
    p90_ttft_ms: float | None = None
    p95_ttft_ms: float | None = None
    p99_ttft_ms: float | None = None
    mean_tpot_ms: float | None = None
    median_tpot_ms: float | None = None
    p90_tpot_ms: float | None = None
    p95_tpot_ms: float | None = None
    p99_tpot_ms: float | None = None
    mean_itl_ms: float | None = None
    median_itl_ms: float | None = None
    p90_itl_ms: float | None = None
    p95_itl_ms: float | None = None
    p99_itl_ms: float | None = None
    max_itl_ms: float | None = None
    mean_chunk_itl_ms: float | None = None
    median_chunk_itl_ms: float | None = None
    p90_chunk_itl_ms: float | None = None
    p95_chunk_itl_ms: float | None = None
    p99_chunk_itl_ms: float | None = None
    # per-request detail arrays, in dispatch order (itls and ttfts in seconds)
    itls: list[list[float]] | None = None
    ttfts: list[float] | None = None
    errors: list[str] | None = None
    output_lens: list[int] | None = None
    request_accept_lengths: list[float | None] | None = None
    spec_verify_cts: list[int | None] | None = None

    @classmethod
    def from_line(cls, line: dict[str, Any]) -> BenchLine:
        """The line as read from the JSONL file (or as build_record made it)."""
        return cls.from_dict(line)

    def figure(self, name: str) -> Any:
        """A total or latency figure by its name in the line (a field of this record)."""
        return getattr(self, name)
