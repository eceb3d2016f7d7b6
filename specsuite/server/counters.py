"""Server-side counters from Prometheus /metrics, as before/after deltas around a workload.

The reference server exports the recycled-draft_probs bug's ground truth (non-finite `draft_probs` entries, sampler
fallback emissions); each server kind names its own spec counters (`ServerKind.counters`, specsuite/server/kinds/).
All are read the same way: sum every sample of a metric over its label sets, and subtract the reading taken before
the workload.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from specsuite.server import refserver_contract

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


def counters_of_interest(kind_counters: Sequence[str]) -> tuple[str, ...]:
    """The reference server's ground-truth counters, then the server kinds' own (`kind_counters`)."""
    return (*refserver_contract.COUNTERS, *kind_counters)


def counter_deltas(before: str | None, after: str | None, kind_counters: Sequence[str]) -> dict[str, float]:
    """Increase of each counter of interest (`counters_of_interest`) between two scrapes; empty without metrics."""
    if before is None or after is None:
        return {}
    start, end = parse_prometheus(before), parse_prometheus(after)
    return {name: end[name] - start.get(name, 0.0) for name in counters_of_interest(kind_counters) if name in end}
