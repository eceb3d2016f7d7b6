"""The Prometheus names the harness and the reference server use under `sglang:` exist in SGLang
0.5.23's metrics code, with the same type.

SGLang declares each metric as `self.x = Counter|Gauge|Histogram(name="sglang:...")`
(srt/observability/metrics_collector.py, e.g. 364-375, 511-545, 1855-1870, 1940-1965;
srt/observability/http_request_metrics.py:29-41). A counter declared without `_total` is exposed
with it, as prometheus_client does.
"""

from __future__ import annotations

import re
from pathlib import Path

from specsuite.families.correctness import family as correctness
from specsuite.server import kinds

ROOT = Path(__file__).resolve().parents[2]
METRIC_FILES = ("srt/observability/metrics_collector.py", "srt/observability/http_request_metrics.py")
DECLARATION = re.compile(r"\b(Counter|Gauge|Histogram|Summary)\(\s*name=\"(sglang:[a-z0-9_:]+)\"")


def sglang_metrics(sglang_source) -> dict[str, str]:
    """Exposed sample name -> Prometheus type, for every metric SGLang declares."""
    exposed: dict[str, str] = {}
    for path in METRIC_FILES:
        for kind, name in DECLARATION.findall(sglang_source(path)):
            kind = kind.lower()
            if kind == "counter" and not name.endswith("_total"):
                name += "_total"
            exposed[name] = kind
    return exposed


def test_the_scan_finds_sglang_metrics(sglang_source):
    """A guard for the regex: the well-known names are found with their types."""
    metrics = sglang_metrics(sglang_source)
    assert metrics["sglang:num_requests_total"] == "counter"
    assert metrics["sglang:spec_accept_length"] == "gauge"
    assert len(metrics) > 50


def test_counters_the_harness_reads_exist(sglang_source):
    """specsuite/server/kinds/sglang/kind.py and specsuite/families/correctness/family.py read these by name; a renamed metric
    would read as "no metrics" and silently drop the server-side evidence."""
    metrics = sglang_metrics(sglang_source)
    read = [*kinds.get("sglang").counters, correctness.GENERATED_TOKENS]
    assert read and all(name.startswith("sglang:") for name in read)
    assert {name: metrics.get(name) for name in read} == {name: "counter" for name in read}


def test_refserver_sglang_metrics_match_name_and_type(sglang_source):
    """The reference server exports some metrics under SGLang's names "with the same meaning"
    (specsuite/refserver/metrics.py); each must exist in SGLang with the same type."""
    source = (ROOT / "specsuite/refserver/metrics.py").read_text()
    ours = dict(re.findall(r'\("(sglang:[a-z0-9_]+)", "(counter|gauge)"', source))
    assert len(ours) >= 10
    metrics = sglang_metrics(sglang_source)
    assert {name: metrics.get(name) for name in ours} == ours
