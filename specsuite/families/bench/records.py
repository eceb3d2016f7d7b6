"""The serving benchmark's records: a run's summary (``workloads.bench``: one, or a list of them) and what a pytest
session keeps of one run.  The results model keeps the family's data raw (`Workloads.part`); `bench_runs` reads it typed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specsuite.results.types import Record, Workloads, sampling_setting


@dataclass
class BenchRun(Record):
    """One serving-benchmark summary (specsuite.families.bench): the named figures; the rest in ``extra``."""

    backend: str | None = None
    dataset_name: str | None = None
    completed: int | None = None
    failed: int | None = None
    duration: float | None = None
    request_throughput: float | None = None
    output_throughput: float | None = None
    median_ttft_ms: float | None = None
    median_itl_ms: float | None = None
    median_e2e_latency_ms: float | None = None
    accept_length: float | None = None
    warnings: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)  # how it ran: temperature, top_p, ...
    itls: list[list[float]] = field(default_factory=list)  # per request, its inter-token latencies (s)
    server_under_test: dict[str, Any] | None = None  # `specsuite bench`'s record: the server it measured (ServerChoice)

    def temperature(self) -> float:
        """The sampling temperature it ran at (its config's, else its own field, else greedy)."""
        return sampling_setting(self.config, self.extra, "temperature", 0.0)

    def top_p(self) -> float:
        return sampling_setting(self.config, self.extra, "top_p", 1.0)

    def setting(self) -> tuple[float, float]:
        """Temperature and top_p it ran at (bench_serving's 0 and 1 when unrecorded)."""
        return self.temperature(), self.top_p()

    def itl_gaps_ms(self) -> list[float]:
        """Every per-token ITL in ms (``itls``: per-request lists in seconds), negative or missing gaps left out."""
        return [float(x) * 1000.0 for request in (self.itls or []) for x in (request or []) if x is not None and x >= 0]


@dataclass
class BenchSummary(BenchRun):
    """What a pytest session keeps of one benchmark run (specsuite.families.bench.record.session_summary): the
    `BenchRun` figures, the lengths it sent, and the per-request values the suite's tests check."""

    median_tpot_ms: float | None = None
    random_input_len: int | None = None
    random_output_len: int | None = None  # the length sent: fitted to the server's context length when needed
    cache_flushed: bool | None = None  # False: the server refused /flush_cache
    output_lens: list[int] = field(default_factory=list)
    request_accept_lengths: list[float | None] = field(default_factory=list)
    spec_verify_cts: list[int | None] = field(default_factory=list)
    ttft_ms: list[float] = field(default_factory=list)
    itl_ms: list[float] = field(default_factory=list)  # every per-token ITL in ms, or a seeded reservoir of them, sorted
    itl_samples_total: int = 0
    itl_ms_is_reservoir: bool = False

    def scalars(self) -> dict[str, Any]:
        """Its single-valued fields as results.json writes them (the A/B comparison's per-run lines)."""
        return {key: value for key, value in self.to_dict().items() if not isinstance(value, (list, dict))}


def bench_runs(workloads: Workloads) -> list[BenchRun]:
    """A repeat's benchmark summaries: one, or a list of them (as some writers kept them)."""
    written = workloads.part("bench")
    if isinstance(written, dict):
        return [BenchRun.from_dict(written)]
    return [BenchRun.from_dict(run) for run in written if isinstance(run, dict)] if isinstance(written, list) else []
