"""The correctness family ("cases"): each sampling case's event rates and accept length.

Records: a repeat's correctness cases (`repeats[].cases`, specsuite.families.correctness).  Metrics: the
detectors' event rates (invalid, fallback and padded-row ids, stray tokens, excess fragments), the rates
only the reference server's counters feed (specsuite.server.refserver_contract.COUNTER_RATES), and the
per-request accept length.  Verdict rules: the exact conditional rate-ratio test on events pooled over
repeats (specsuite.compare.engines.compare_rate), and for the accept length Mann–Whitney with the
Hodges–Lehmann relative shift (one repeat per arm) or Welch on log run-level medians (two or more).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from specsuite.compare.engines import Pending, compare_rate, log_sd, relative_mde, welch_pending
from specsuite.compare.metric import Events, Metric, ReportFormat
from specsuite.compare.series import CONFIDENCE, CaseRuns, interval, num, per_request_series
from specsuite.families.correctness.driver import CorrectnessDriver
from specsuite.families.correctness.options import OPTIONS, CorrectnessSettings
from specsuite.families.workload_family import AbsoluteRule, FamilyRecord, FamilyView, VerdictRule, WorkloadFamily
from specsuite.results.types import (
    ESTIMATES_AGAINST_TEMPERATURE,
    ESTIMATES_PER_CASE,
    ArmCounts,
    Case,
    ComparisonRow,
    Effect,
    FigureSpec,
    Repeat,
    fmt,
)
from specsuite.server import refserver_contract
from specsuite.stats import hodges_lehmann, mann_whitney, run_level_medians

GENERATED_TOKENS = "sglang:generation_tokens_total"


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
    """A rate the reference server registers (specsuite.server.refserver_contract.COUNTER_RATES), read from its counters."""
    return _rate(entry.name, entry.label, _counter_events(entry.events_counter, entry.exposure_counter), entry.report_label,
                 unit=entry.unit, exposure_unit=entry.exposure_unit, report_format=entry.report_format,  # type: ignore[arg-type]
                 server_counter=True, corruption_sign=entry.corruption_sign, short=entry.short, plot_title=entry.plot_title,
                 axis_label=entry.axis_label)


# Emulator-only metrics: the reference server's contract registers them; this module names none of its counters.
SERVER_COUNTER_RATES: tuple[Metric, ...] = tuple(_server_counter_rate(entry) for entry in refserver_contract.COUNTER_RATES)

METRICS: tuple[Metric, ...] = (
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
)


# ---------------------------------------------------------------- the accept length's verdict rule


def _compare_accept(metric: Metric, cand: CaseRuns, base: CaseRuns, threshold: float, row: ComparisonRow) -> Pending | None:
    c_series, b_series = per_request_series(cand, metric), per_request_series(base, metric)
    if not c_series or not b_series:
        return None
    if len(c_series) >= 2 and len(b_series) >= 2:
        a, b = run_level_medians([v for _, v in c_series]), run_level_medians([v for _, v in b_series])
        row.update(candidate_value=float(np.median(a)), baseline_value=float(np.median(b)), value_statistic="median of run medians",
                   n=ArmCounts.written(candidate=len(a), baseline=len(b), unit="repeats"),
                   mde=relative_mde(log_sd(a, b), len(a), len(b), threshold, repeats=True))
        return welch_pending(a, b, threshold, row, higher_is_better=metric.higher_is_better, equivalence_margin=None)
    a = np.concatenate([v for _, v in c_series])
    b = np.concatenate([v for _, v in b_series])
    shift = hodges_lehmann(a, b, confidence=CONFIDENCE, relative=True)
    # The values a rank test compares are medians; the report's per-case tables show means of requests, and say so.
    row.update(candidate_value=float(np.median(a)), baseline_value=float(np.median(b)), value_statistic="median of requests",
               p_value=mann_whitney(a, b).p_value, test="Mann–Whitney U; Hodges–Lehmann relative shift",
               effect=Effect.written(name="Hodges–Lehmann shift (relative)", scale="relative", value=num(shift.estimate),
                                     ci=interval(shift.ci)),
               n=ArmCounts.written(candidate=int(a.size), baseline=int(b.size), unit="requests"),
               mde=relative_mde(log_sd(a, b), int(a.size), int(b.size), threshold, repeats=False))
    return Pending(row, shift.estimate, shift.ci, threshold, metric.higher_is_better)


RULES = (
    VerdictRule("rate_ratio", "exact conditional rate-ratio test (binomial) on events pooled over repeats; effect = rate ratio",
                compare_rate),
    VerdictRule("accept_shift", "one repeat: Mann–Whitney on per-request values with the Hodges–Lehmann relative shift; "
                                "repeats: Welch t on log run-level medians", _compare_accept),
)


# ---------------------------------------------------------------- records and the report's line


def _records(repeat: Repeat) -> list[FamilyRecord]:
    return [FamilyRecord(case.case_id, float(case.temperature or 0.0), float(case.top_p or 1.0), case)
            for case in repeat.cases or [] if case.has("case_id")]


def _state(view: FamilyView, arm: str) -> str:
    """Invalid ids in the sampled cases, the highest stray rate, the range of the accept length."""
    sampled = [r for r in view.arm_metric(arm, "invalid_ids") if r.temperature > 0]
    parts = []
    if sampled:
        k, n = sum(int(r.k or 0) for r in sampled), sum(float(r.n or 0) for r in sampled)
        parts.append(f"{k:,} invalid ids in {int(n):,} sampled tokens")
    stray = [r.value for r in view.arm_metric(arm, "stray_per_1200") if r.value is not None]
    if stray:
        parts.append(f"stray up to {fmt(max(stray))} per 1200" if max(stray) > 0 else "no stray tokens")
    accept = sorted(r.value for r in view.arm_metric(arm, "accept_length") if r.value is not None)
    if accept:
        parts.append(f"accept length (mean of requests) {fmt(accept[0])}" + (f"–{fmt(accept[-1])}" if len(accept) > 1 else ""))
    return ", ".join(parts)


# The event-rate figure's panels, in its order (those the analysis holds).
RATE_PANELS = ("invalid_ids", "fallback_ids", "sampler_fallbacks", "stray_per_1200", "nonfinite_draft_probs", "fragment_excess")


def _figures(view: FamilyView) -> list[FigureSpec]:
    """The event rates first (the corruption), then the accept length against temperature (its signature)."""
    return [
        FigureSpec(kind=ESTIMATES_PER_CASE, file="rates.png", title="Event rates per sampling case",
                   caption="Points are pooled rates; bars are 95% Clopper–Pearson intervals (non-finite entries per batch: "
                           "point only). A zero with a bar is 'none seen, and at most this much'.",
                   figure_title="Event rates per sampling case and arm (pooled over repeats, 95% CI)", place=10,
                   metrics=list(RATE_PANELS), absent_note="Event-rate figure: no detector or counter data in these results.",
                   event_rates=True),
        FigureSpec(kind=ESTIMATES_AGAINST_TEMPERATURE, file="accept_length.png", title="Accept length against temperature",
                   caption="Healthy acceptance does not rise with temperature; a rise towards the ceiling is the signature "
                           "of corrupt draft probabilities accepted by the sampler.",
                   figure_title="Accept length against temperature (mean of requests, 95% CI)", place=30,
                   metrics=["accept_length"], absent_note="Accept-length figure: these results hold no per-request accept lengths.",
                   x_label="temperature", y_label="accept length (tokens per verify step)"),
    ]


FAMILY = WorkloadFamily(
    name="cases", label="correctness", results_key="cases", suite_module="test_correctness", records=_records,
    metrics=METRICS, verdict_rules=RULES, state=_state,
    # The before/after rows in the recycled-draft_probs bug report's order, and the spread-between-repeats rows.
    report_rows=(*(entry.name for entry in SERVER_COUNTER_RATES), "stray_per_1200", "invalid_ids", "fallback_ids", "accept_length"),
    spread_rows=("accept_length", "invalid_ids", "stray_per_1200",
                 *(entry.name for entry in refserver_contract.COUNTER_RATES if entry.spread_row)),
    reported_when_absent=True, effect_in_line=False,
    # options, settings and nightly rules
    options=OPTIONS, settings=CorrectnessSettings, settings_key="correctness",
    main_job_markers="correctness", main_job_part="cases",
    absolute_rules=(AbsoluteRule("padded_rows", "padded-row ids beyond the model's own mass", "test_correctness", ("test_padded_row_ids_within_model_mass",)),),
    # workload driver, pytest marker and fixtures
    driver=CorrectnessDriver, marker=("correctness", "token-validity, stray-character and acceptance checks"),
    pytest_plugin="specsuite.pytest_plugin.correctness",
    # report figures and records (results side)
    figures=_figures,
)
