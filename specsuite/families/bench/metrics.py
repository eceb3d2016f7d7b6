"""bench_serving's aggregate metrics, computed from `RequestOutput`s, plus our additions.

Definitions (SGLang 0.5.23 `calculate_metrics`), over successful requests only:
- totals: input = sum of planned prompt lengths (client side), output = sum of `output_len`
  (server counts, or the OpenAI fallback), retokenized output = encode(text) without specials;
- throughputs = total / duration, where duration runs from the first dispatch to after the
  final /server_info read; concurrency = sum(E2E) / duration (Little's law);
- TTFT, TPOT = (E2E - TTFT) / (output_len - 1) for output_len > 1, and E2E are per request;
  ITL pools every entry of every request (weighted by tokens for the native backend);
- for sglang-oai and sglang-oai-chat, when the server accept length is > 0, each chunk gap g is
  split into k entries of g / k with k = len(encode(chunk text)) (k = 0 is taken as 1, where
  bench_serving would divide by zero);
- statistics: mean, median (np.median), std (np.std, population), p90/p95/p99 (np.percentile,
  linear); an empty list counts as [0]; milliseconds;
- peak output tokens/s and peak concurrent requests: 1-second buckets from the first start,
  token times rebuilt as start + TTFT + cumulative ITL; a request occupies every bucket from
  int(start) to int(end) inclusive.
Additions: the same statistics for per-chunk ITL (`*_chunk_itl_ms`) and for the per-request accept
length (`*_request_accept_length`, from meta_info.spec_accept_length, or on vllm from the usage
chunk's metrics.speculative_decoding.mean_acceptance_length), plus `failed`. On vllm, `itl` is per
token and `chunk_itl` is what `vllm bench serve` calls ITL (see specsuite.families.bench.client).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from specsuite.errors import SpecsuiteError
from specsuite.families.bench.client import RequestOutput
from specsuite.server import kinds

STATS = ("mean", "median", "std", "p90", "p95", "p99")
TIMED_METRICS = ("ttft", "tpot", "itl", "e2e_latency", "chunk_itl")


def distribution(values: Sequence[float], name: str, scale: float = 1000.0, suffix: str = "_ms") -> dict[str, float]:
    """`{stat}_{name}{suffix}` for the six statistics, as bench_serving computes them ([0] when empty)."""
    data = np.asarray(values if len(values) else [0.0], dtype=float) * scale
    return {
        f"mean_{name}{suffix}": float(np.mean(data)),
        f"median_{name}{suffix}": float(np.median(data)),
        f"std_{name}{suffix}": float(np.std(data)),
        f"p90_{name}{suffix}": float(np.percentile(data, 90)),
        f"p95_{name}{suffix}": float(np.percentile(data, 95)),
        f"p99_{name}{suffix}": float(np.percentile(data, 99)),
    }


def pooled_itl(outputs: Sequence[RequestOutput], backend: str, accept_length: float | None,
               encode: Callable[[str], list[int]] | None) -> list[float]:
    """Every ITL entry of the successful requests, with bench_serving's retokenized split where it applies."""
    split = accept_length is not None and accept_length > 0 and kinds.bench_backend(backend).splits_chunk_gaps
    if split and encode is None:
        raise SpecsuiteError("splitting OpenAI chunk gaps per token needs the tokenizer")
    pooled: list[float] = []
    for out in outputs:
        if not out.success:
            continue
        if not split:
            pooled.extend(out.itl)
            continue
        for gap, text in zip(out.itl, out.text_chunks, strict=False):
            k = max(1, len(encode(text)))  # type: ignore[misc]
            pooled.extend([gap / k] * k)
    return pooled


def peak_buckets(outputs: Sequence[RequestOutput]) -> tuple[float, int]:
    """(max output tokens in a 1-s bucket, max requests touching a 1-s bucket), bench_serving's way."""
    done = [o for o in outputs if o.success]
    if not done:
        return 0.0, 0
    first = min(o.start_time for o in done)
    last = max(o.start_time + o.latency for o in done)
    size = int(np.ceil(last - first)) + 1
    tokens = np.zeros(size)
    requests = np.zeros(size)
    for out in done:
        times = out.start_time + out.ttft + np.concatenate(([0.0], np.cumsum(out.itl)))
        buckets = (times - first).astype(int)
        buckets = buckets[(buckets >= 0) & (buckets < size)]
        np.add.at(tokens, buckets, 1)
        begin = int(out.start_time - first)
        end = int(out.start_time + out.latency - first)
        requests[begin : min(end + 1, size)] += 1
    return float(tokens.max()), int(requests.max())


def calculate_metrics(
    outputs: Sequence[RequestOutput],
    duration_s: float,
    backend: str,
    accept_length: float | None,
    encode: Callable[[str], list[int]] | None = None,
) -> dict[str, Any]:
    """bench_serving's BenchmarkMetrics as a dict with its JSON key names, plus our additions."""
    if duration_s <= 0:
        raise SpecsuiteError(f"benchmark duration must be positive, got {duration_s}")
    done = [o for o in outputs if o.success]
    total_input = sum(o.prompt_len for o in done)
    total_output = sum(o.output_len for o in done)
    retokenized = sum(len(encode(o.generated_text)) for o in done) if encode is not None else None
    tpots = [(o.latency - o.ttft) / (o.output_len - 1) for o in done if o.output_len > 1]
    e2e = [o.latency for o in done]
    accepts = [o.spec_accept_length for o in done if o.spec_accept_length is not None]
    peak_tokens, peak_requests = peak_buckets(outputs)
    itl = pooled_itl(outputs, backend, accept_length, encode)
    metrics: dict[str, Any] = {
        "duration": duration_s,
        "completed": len(done),
        "failed": len(outputs) - len(done),
        "total_input_tokens": total_input,
        "total_input_text_tokens": total_input,
        "total_input_vision_tokens": 0,
        "total_output_tokens": total_output,
        "total_output_tokens_retokenized": retokenized,
        "request_throughput": len(done) / duration_s,
        "input_throughput": total_input / duration_s,
        "output_throughput": total_output / duration_s,
        "output_throughput_retokenized": None if retokenized is None else retokenized / duration_s,
        "total_throughput": (total_input + total_output) / duration_s,
        "total_throughput_retokenized": None if retokenized is None else (total_input + retokenized) / duration_s,
        **distribution(e2e, "e2e_latency"),
        **distribution([o.ttft for o in done], "ttft"),
        **distribution(tpots, "tpot"),
        **distribution(itl, "itl"),
        "max_itl_ms": float(np.max(itl) * 1000) if itl else 0.0,
        **distribution([g for o in done for g in o.chunk_itl], "chunk_itl"),
        "concurrency": float(np.sum(e2e)) / duration_s if e2e else 0.0,
        "accept_length": accept_length,
        **distribution(accepts, "request_accept_length", scale=1.0, suffix=""),
        "max_output_tokens_per_s": peak_tokens,
        "max_concurrent_requests": peak_requests,
    }
    if not accepts:
        for stat in STATS:
            metrics[f"{stat}_request_accept_length"] = None
    return metrics
