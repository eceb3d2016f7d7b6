"""The A/B metrics, one entry each: the only place a metric's facts are written down.

Each `Metric` says what it is called (`label`, `unit`), which way is better (`direction`), the
practical threshold a "better"/"worse" verdict needs by default (`threshold`, on the effect's
`scale`), which test compares two arms (`statistic`, a key of `STATISTICS`), where its data lives
in a repeat and how it is read (`source`, `reading`, `extract`), and how the report shows it
(`report_label`, `report_format`).  The A/B verdicts (harness.compare.verdicts), the per-arm
estimates (harness.compare.metrics), `--fail-on` (harness.compare.fail_on) and the history store
(harness.history.metrics) read it directly; the report, which imports nothing from the harness,
reads the same facts from the analysis, where `compare_arms` writes `metric_table()`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from harness.results.types import BenchRun, Case, Gsm8kRun, Gsm8kScoring, Proportion
from harness.server import refserver_contract

Direction = Literal["higher", "lower"]
EffectScale = Literal["ratio", "relative", "difference"]
Source = Literal["cases", "gsm8k", "bench"]  # a repeat's correctness cases, or one of its workloads
Reading = Literal["events", "per_request", "proportion", "run_value"]
Statistic = Literal["rate_ratio", "accept_shift", "mcnemar", "fisher", "run_level"]
ReportFormat = Literal["token_rate", "per_1200", "per_batch", "plain", "proportion", "ms", "tok_s"]

GSM8K_DEFINITION = "sglang"  # the answer-extraction rule the A/B scores GSM8K by
GENERATED_TOKENS = "sglang:generation_tokens_total"

Events = tuple[int, float]  # (events, exposure)

STATISTICS: dict[str, str] = {
    "rate_ratio": "exact conditional rate-ratio test (binomial) on events pooled over repeats; effect = rate ratio",
    "accept_shift": "one repeat: Mann–Whitney on per-request values with the Hodges–Lehmann relative shift; "
                    "repeats: Welch t on log run-level medians",
    "mcnemar": "exact McNemar on questions paired by index within a repeat; effect = accuracy difference",
    "fisher": "Fisher's exact test on counts pooled over repeats; effect = risk difference",
    "run_level": "repeats: Welch t on log run-level values with TOST within the threshold, and the rank-based pair "
                 "(Mann–Whitney, Hodges–Lehmann); one run: Mann–Whitney and a bootstrap relative median difference "
                 "on per-token values",
}


# ---------------------------------------------------------------- how each metric is read


def _detector_events(*names: str) -> Callable[[Case], Events | None]:
    """Events of the first detector present in a case, out of its denominator."""
    def extract(case: Case) -> Events | None:
        for name in names:
            events = case.detector_events(name)
            if events is not None:
                return events
        return None
    return extract


def _counter_events(events_key: str, exposure_key: str | None) -> Callable[[Case], Events | None]:
    """A server counter delta out of another counter (or, with None, out of generated tokens)."""
    def extract(case: Case) -> Events | None:
        counters = case.server_counters or {}
        if events_key not in counters:
            return None
        exposure = counters.get(exposure_key) if exposure_key else counters.get(GENERATED_TOKENS, case.n_tokens)
        if not exposure or exposure <= 0:
            return None
        return int(round(counters[events_key])), float(exposure)
    return extract


def _accept_lengths(case: Case) -> list[float]:
    return case.accept_lengths()


def _gsm8k_counts(pick: Callable[[Gsm8kScoring], Proportion | None]) -> Callable[[Gsm8kRun], tuple[int, int] | None]:
    """(k, n) of one GSM8K proportion (accuracy or invalid rate) under GSM8K_DEFINITION."""
    def extract(run: Gsm8kRun) -> tuple[int, int] | None:
        entry = pick(run.scoring(GSM8K_DEFINITION))
        if entry is None or not entry.n:
            return None
        return int(entry.k or 0), int(entry.n)
    return extract


def _accuracy(scoring: Gsm8kScoring) -> Proportion | None:
    return scoring.accuracy


def _invalid(scoring: Gsm8kScoring) -> Proportion | None:
    return scoring.invalid


def itl_ms(run: BenchRun | dict[str, Any]) -> list[float]:
    """Per-token ITLs in ms (bench_serving `itls`: per-request lists in seconds), every gap kept: the same
    values whose median is the run's `median_itl_ms`, so the report's ITL is the results' ITL. Takes the
    typed run, or a benchmark summary dict (loaded as one)."""
    return (run if isinstance(run, BenchRun) else BenchRun.from_dict(run)).itl_gaps_ms()


def _median_itl(run: BenchRun) -> float | None:
    if run.median_itl_ms is not None:
        return float(run.median_itl_ms)
    itls = itl_ms(run)
    return float(np.median(itls)) if itls else None


def _output_throughput(run: BenchRun) -> float | None:
    return run.output_throughput


# ---------------------------------------------------------------- the registry


@dataclass(frozen=True)
class Metric:
    """One A/B metric.  `extract` takes a typed correctness `Case` (source "cases") or a workload run
    (`Gsm8kRun`, `BenchRun`: harness.results.types) and
    returns, by `reading`: (events, exposure) or None; the per-request values; (k, n) or None;
    or one value per run (None when missing)."""

    name: str
    label: str
    unit: str
    direction: Direction  # which way is better
    threshold: float  # default practical threshold, on `scale` (ratio: beyond 1 + t; relative: |change| > t; difference: > t)
    scale: EffectScale
    statistic: Statistic
    source: Source
    reading: Reading
    extract: Callable[[Any], Any]  # Case, Gsm8kRun or BenchRun -> by `reading`
    report_label: str  # the row of the report's before/after table
    report_format: ReportFormat
    rate_scale: float = 1.0  # events: display value = events / exposure * rate_scale
    exposure_unit: str = ""
    bad_events: bool = False  # the candidate's value is a count of bad events: `--fail-on METRIC:any` applies
    server_counter: bool = False  # read from a server counter: absent when the server exports none
    corruption_sign: bool = False  # "worse" here is a sign of corrupt sampling (see suspect_when_better)
    suspect_when_better: bool = False  # "better" while a corruption sign is "worse" is the founding bug's signature
    per_token: Callable[[BenchRun], list[float]] | None = None  # values pooled over one run, for one-run tests
    watch_both_ways: bool = False  # history: a step either way is worth a look
    version: int = 1  # bump when the definition changes: the history never joins old and new values
    short: str = ""  # the report's verdict lines ("worse on invalid ids, stray rate"); the label when empty
    plot_title: str = ""  # the report's figure panel title
    axis_label: str = ""  # the report's figure y axis; the unit when empty

    @property
    def higher_is_better(self) -> bool:
        return self.direction == "higher"

    def describe(self) -> dict[str, Any]:
        """The JSON-ready facts a renderer needs (everything but the extractors)."""
        return {"label": self.label, "unit": self.unit, "direction": self.direction, "threshold": self.threshold,
                "scale": self.scale, "statistic": self.statistic, "test": STATISTICS[self.statistic], "source": self.source,
                "report_label": self.report_label, "report_format": self.report_format, "server_counter": self.server_counter,
                "bad_events": self.bad_events, "version": self.version, "short": self.short or self.label,
                "plot_title": self.plot_title or self.label, "axis_label": self.axis_label or self.unit}


def _rate(name: str, label: str, extract: Callable[[Case], Events | None], report_label: str, *,
          unit: str = "per generated token", exposure_unit: str = "tokens", rate_scale: float = 1.0,
          report_format: ReportFormat = "token_rate", **flags: Any) -> Metric:
    """An event rate: lower is better, an exact rate-ratio test, a 10 % ratio threshold; a per-token rate is
    plotted in percent."""
    if report_format == "token_rate":
        flags.setdefault("axis_label", "% of generated tokens")
    return Metric(name, label, unit, "lower", 0.10, "ratio", "rate_ratio", "cases", "events", extract, report_label,
                  report_format, rate_scale=rate_scale, exposure_unit=exposure_unit, bad_events=True, **flags)


def _server_counter_rate(entry: refserver_contract.CounterRate) -> Metric:
    """A rate the reference server registers (harness.server.refserver_contract.COUNTER_RATES), read from its counters."""
    return _rate(entry.name, entry.label, _counter_events(entry.events_counter, entry.exposure_counter), entry.report_label,
                 unit=entry.unit, exposure_unit=entry.exposure_unit, report_format=entry.report_format,  # type: ignore[arg-type]
                 server_counter=True, corruption_sign=entry.corruption_sign, short=entry.short, plot_title=entry.plot_title,
                 axis_label=entry.axis_label)


# Emulator-only metrics: the reference server's contract registers them; this module names none of its counters.
SERVER_COUNTER_RATES: tuple[Metric, ...] = tuple(_server_counter_rate(entry) for entry in refserver_contract.COUNTER_RATES)

REGISTRY: tuple[Metric, ...] = (
    _rate("invalid_ids", "invalid ids", _detector_events("invalid_id"), "invalid ids / generated tokens", corruption_sign=True,
          plot_title="Invalid token ids"),
    _rate("fallback_ids", "sampler fallback ids (vocab_size-1)", _detector_events("fallback_id"),
          "fallback ids (vocab_size-1) / generated tokens", corruption_sign=True, short="fallback ids",
          plot_title="Fallback ids (vocab_size-1)"),
    _rate("padded_row_ids", "padded-row ids", _detector_events("padded_row_id"), "padded-row ids / generated tokens",
          corruption_sign=True, plot_title="Padded-row ids"),
    _rate("stray_per_1200", "stray tokens per 1200 generated", _detector_events("stray_char"), "stray tokens per 1200 generated",
          unit="per 1200 generated tokens", rate_scale=1200.0, report_format="per_1200", corruption_sign=True,
          short="stray rate", plot_title="Stray tokens"),
    _rate("fragment_excess", "excess structural fragments", _detector_events("fragment_id", "fragment_text"),
          "excess structural fragments / generated tokens", short="fragments", plot_title="Excess fragments"),
    *SERVER_COUNTER_RATES,
    # A drop slows serving; a rise at T > 0 can be a broken accept test, so the history watches both ways.
    Metric("accept_length", "accept length", "tokens per verify step", "higher", 0.02, "relative", "accept_shift", "cases",
           "per_request", _accept_lengths, "accept length (mean of requests)", "plain", suspect_when_better=True,
           watch_both_ways=True, short="acceptance", plot_title="Accept length (run median)"),
    Metric("gsm8k_accuracy", "GSM8K accuracy", "fraction correct", "higher", 0.02, "difference", "mcnemar", "gsm8k",
           "proportion", _gsm8k_counts(_accuracy), "GSM8K accuracy", "proportion", short="accuracy", axis_label="% correct"),
    Metric("gsm8k_invalid", "GSM8K invalid rate", "fraction invalid", "lower", 0.01, "difference", "fisher", "gsm8k",
           "proportion", _gsm8k_counts(_invalid), "GSM8K invalid rate", "proportion", bad_events=True,
           short="invalid answers", plot_title="GSM8K invalid answers", axis_label="% invalid"),
    Metric("itl_median", "median ITL", "ms", "lower", 0.01, "relative", "run_level", "bench", "run_value", _median_itl,
           "median ITL", "ms", per_token=itl_ms, plot_title="Median ITL", version=2),  # 2: one stamp per SSE event, zeros kept
    Metric("output_throughput", "output throughput", "tok/s", "higher", 0.01, "relative", "run_level", "bench", "run_value",
           _output_throughput, "output throughput", "tok_s", plot_title="Output throughput"),
)

BY_NAME: dict[str, Metric] = {metric.name: metric for metric in REGISTRY}
METRICS: tuple[str, ...] = tuple(BY_NAME)  # the order of comparison rows

# The report's layout: the before/after rows in the recycled-draft_probs bug report's order, and the spread-between-repeats rows.
REPORT_ROWS = (*(entry.name for entry in SERVER_COUNTER_RATES), "stray_per_1200", "invalid_ids", "fallback_ids", "accept_length",
               "gsm8k_accuracy", "gsm8k_invalid", "itl_median", "output_throughput")
SPREAD_ROWS = ("accept_length", "invalid_ids", "stray_per_1200",
               *(entry.name for entry in refserver_contract.COUNTER_RATES if entry.spread_row), "gsm8k_accuracy", "itl_median",
               "output_throughput")

SUSPECT_NOTE = ("higher accept length in an arm that is worse on {signs}: the founding bug's signature (acceptance climbs "
                "when the sampler falls back to a padded-vocabulary id), not a speed-up")


def metric(name: str) -> Metric:
    """The registry entry of `name`; KeyError names the known metrics."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown metric {name!r}; expected one of {', '.join(METRICS)}") from None


def default_thresholds() -> dict[str, float]:
    return {entry.name: entry.threshold for entry in REGISTRY}


def metric_table() -> dict[str, Any]:
    """The registry as JSON, for the analysis (and so the report): metrics by name, then the layout."""
    return {"metrics": {entry.name: entry.describe() for entry in REGISTRY}, "report_rows": list(REPORT_ROWS),
            "spread_rows": list(SPREAD_ROWS)}
