"""Server-side counters from Prometheus /metrics, as before/after deltas around a workload.

The reference server exports the recycled-draft_probs bug's ground truth (non-finite `draft_probs` entries, sampler
fallback emissions); SGLang and vLLM export their own spec counters.  Both are read the same way: sum every
sample of a metric over its label sets, and subtract the reading taken before the workload.
"""

from __future__ import annotations

import math
import re

from harness.server import refserver_contract

COUNTERS_OF_INTEREST = (
    *refserver_contract.COUNTERS,
    "sglang:spec_verify_calls_total",
    "sglang:generation_tokens_total",
    "sglang:num_requests_total",
    "sglang:num_aborted_requests_total",
    # vLLM's (v1/spec_decode/metrics.py, v1/metrics/loggers.py); present only when it speculates.
    "vllm:spec_decode_num_drafts_total",
    "vllm:spec_decode_num_draft_tokens_total",
    "vllm:spec_decode_num_accepted_tokens_total",
    "vllm:generation_tokens_total",
)

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def parse_prometheus(text: str) -> dict[str, float]:
    """Metric name → value summed over label sets; comments and malformed lines are skipped."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if not match:
            continue
        try:
            value = float(match.group(3))
        except ValueError:
            continue
        if math.isfinite(value):
            values[match.group(1)] = values.get(match.group(1), 0.0) + value
    return values


def label_values(text: str, metric: str, label: str) -> set[str]:
    """The distinct values one label takes on the samples of one metric."""
    found = set()
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match and match.group(1) == metric and match.group(2):
            labels = re.findall(r'(\w+)="([^"]*)"', match.group(2))
            found.update(value for name, value in labels if name == label)
    return found


def counter_deltas(before: str | None, after: str | None) -> dict[str, float]:
    """Increase of each counter of interest between two scrapes; empty without metrics."""
    if before is None or after is None:
        return {}
    start, end = parse_prometheus(before), parse_prometheus(after)
    return {name: end[name] - start.get(name, 0.0) for name in COUNTERS_OF_INTEREST if name in end}
