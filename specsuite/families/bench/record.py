"""The result of one benchmark run: bench_serving's JSONL line, its printed table, and the compact
form the pytest session stores for the A/B report.

The line carries bench_serving's keys (run parameters, `server_info`, totals, throughputs, the
mean/median/std/p90/p95/p99 of e2e_latency, ttft, tpot and itl in ms, concurrency, accept_length,
peaks) and its detail arrays (`input_lens`, `output_lens`, `ttfts`, `itls` in seconds,
`errors`; `generated_texts` only with output_details), plus our raw per-request arrays
(`start_times` relative to the first dispatch, `latencies`, `chunk_itls`, `chunk_tokens`,
`request_accept_lengths`, `spec_verify_cts`, `planned_input_lens`) and `status`
(complete | interrupted), `cache_flushed` (None when no flush was asked for) and `warnings`
(one line each, e.g. a refused flush). `request_rate` inf is written as the string "inf" (JSON has no
infinity). The server's api_key is redacted by the writer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from specsuite.families.bench.bench_line import LATENCY_STATS, BenchLine
from specsuite.families.bench.client import RequestOutput
from specsuite.families.bench.records import BenchSummary

RUN_KEYS = ("tag", "backend", "dataset_name", "request_rate", "max_concurrency", "sharegpt_output_len",
            "random_input_len", "random_output_len", "random_range_ratio")
SESSION_RESERVOIR = 4000


def detail_arrays(outputs: Sequence[RequestOutput], start: float, with_texts: bool) -> dict[str, Any]:
    """Per-request arrays, in dispatch order (bench_serving's detail keys first)."""
    details: dict[str, Any] = {
        "input_lens": [o.server_prompt_len or o.prompt_len for o in outputs],
        "output_lens": [o.output_len if o.success else 0 for o in outputs],
        "ttfts": [o.ttft for o in outputs],
        "itls": [o.itl for o in outputs],
        "errors": [o.error for o in outputs],
        "planned_input_lens": [o.prompt_len for o in outputs],
        "start_times": [o.start_time - start for o in outputs],
        "latencies": [o.latency for o in outputs],
        "chunk_itls": [o.chunk_itl for o in outputs],
        "chunk_tokens": [o.chunk_tokens for o in outputs],
        "request_accept_lengths": [o.spec_accept_length for o in outputs],
        "spec_verify_cts": [o.spec_verify_ct for o in outputs],
    }
    if with_texts:
        details["generated_texts"] = [o.generated_text for o in outputs]
    return details


def _json_value(value: Any) -> Any:
    """A run parameter as the line writes it: infinity (a request rate of inf) as the string "inf", JSON having none."""
    return "inf" if isinstance(value, float) and math.isinf(value) else value


def build_record(run: dict[str, Any], server_info: dict[str, Any] | None, metrics: dict[str, Any],
                 details: dict[str, Any], status: str) -> dict[str, Any]:
    """One JSONL line: run parameters, server_info, metrics, details, status."""
    # run: the run's settings by bench_serving's flag names; the JSONL line keeps bench_serving's layout
    params = {key: _json_value(run.get(key)) for key in RUN_KEYS}
    extras = {key: value for key, value in run.items() if key not in RUN_KEYS}
    return {**params, "server_info": server_info, **metrics, "status": status, "run": extras, **details}


def _row(label: str, value: Any) -> str:
    if value is None:
        return f"{label:<40} {'-':<10}"
    if isinstance(value, float):
        return f"{label:<40} {value:<10.2f}"
    return f"{label:<40} {value!s:<10}"


# bench_serving's table rows that print one record field as it is, in its order.
_TOTALS_ROWS = (
    ("Successful requests:", "completed"), ("Failed requests:", "failed"), ("Benchmark duration (s):", "duration"),
    ("Total input tokens:", "total_input_tokens"), ("Total generated tokens:", "total_output_tokens"),
    ("Total generated tokens (retokenized):", "total_output_tokens_retokenized"),
    ("Request throughput (req/s):", "request_throughput"), ("Input token throughput (tok/s):", "input_throughput"),
    ("Output token throughput (tok/s):", "output_throughput"), ("Peak output token throughput (tok/s):", "max_output_tokens_per_s"),
    ("Peak concurrent requests:", "max_concurrent_requests"), ("Total token throughput (tok/s):", "total_throughput"),
    ("Concurrency:", "concurrency"),
)


def format_table(record: dict[str, Any]) -> str:
    """bench_serving's "Serving Benchmark Result" table, with our per-chunk and per-request lines."""
    line = BenchLine.from_line(record)
    lines = ["{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="=")]
    if line.status != "complete":
        lines.append(_row("Status:", line.status))
    lines.append(_row("Backend:", line.backend))
    lines.append(_row("Traffic request rate:", line.request_rate))
    lines.append(_row("Max request concurrency:", line.max_concurrency or "not set"))
    lines += [_row(label, line.figure(key)) for label, key in _TOTALS_ROWS]
    if line.accept_length:
        lines.append(_row("Accept length:", line.accept_length))
    if line.mean_request_accept_length is not None:
        lines.append(_row("Accept length per request (mean):", line.mean_request_accept_length))
    blocks = (("End-to-End Latency", "e2e_latency", "E2E Latency"), ("Time to First Token", "ttft", "TTFT"),
              ("Time per Output Token (excl. 1st token)", "tpot", "TPOT"), ("Inter-Token Latency", "itl", "ITL"),
              ("Inter-Chunk Latency (not split)", "chunk_itl", "chunk ITL"))
    for title, key, label in blocks:
        lines.append("{s:{c}^{n}}".format(s=title, n=50, c="-"))
        for stat in LATENCY_STATS:
            lines.append(_row(f"{stat.capitalize() if stat in ('mean', 'median') else stat.upper()} {label} (ms):", line.figure(f"{stat}_{key}_ms")))
        if key == "itl":
            lines.append(_row("Max ITL (ms):", line.max_itl_ms))
    lines.append("=" * 50)
    return "\n".join(lines)


def session_summary(record: dict[str, Any], reservoir: int = SESSION_RESERVOIR, seed: int = 0) -> BenchSummary:
    """What the pytest session stores under workloads["bench"]: the scalar metrics, the run's
    settings (`config`), bench_serving's per-request `itls` (seconds, as specsuite.analysis.metrics reads
    them), per-request output lengths, accept lengths, verify counts and TTFTs (ms), and `itl_ms`: every per-token ITL in ms, or a
    seeded uniform reservoir of `reservoir` of them, sorted, for the ITL ECDF."""
    line = BenchLine.from_line(record)
    itls = line.itls or []
    itl_ms = np.asarray([g for per_request in itls for g in per_request], dtype=float) * 1000.0
    n_itl = int(itl_ms.size)
    if n_itl > reservoir:
        itl_ms = np.random.default_rng(seed).choice(itl_ms, size=reservoir, replace=False)
    scalars = {key: value for key, value in record.items() if not isinstance(value, (list, dict))}
    # from_dict: the JSONL line's scalars keep bench_serving's names and order; those BenchSummary does not name stay in extra
    return BenchSummary.from_dict({
        **scalars,
        "config": dict(line.run or {}),
        "itls": line.itls,
        "itl_ms": [float(v) for v in np.sort(itl_ms)],
        "itl_samples_total": n_itl,
        "itl_ms_is_reservoir": n_itl > reservoir,
        "output_lens": line.output_lens,
        "request_accept_lengths": line.request_accept_lengths,
        "spec_verify_cts": line.spec_verify_cts,
        "ttft_ms": [t * 1000.0 for t, e in zip(line.ttfts or [], line.errors or [], strict=False) if not e],
        "warnings": list(line.warnings or []),
    })
