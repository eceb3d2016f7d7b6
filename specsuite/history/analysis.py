"""From stored runs to trends: series per configuration, step detection per metric, regressions.

A series is every stored run with one `config_key` and arm, oldest first (runs of different
configurations are never put on one trend or compared; the report lists how they differ).  In a
series, each (metric, sampling case) is a trend of nightly values.  A metric whose version changed
is split at the change: each version is its own stretch, tested on its own, and the plot marks
the boundary.  Steps come from `specsuite.history.steps.detect_steps`; each step gets its effect on
the metric's scale (rate ratio, relative change, difference), whether it passes the metric's
practical threshold, and a kind:

- "regression": the worse direction (up for rates and ITL, down for accuracy and throughput);
- "improvement": the better direction;
- "change": a metric where either direction is suspect (accept length: a rise at T > 0 is the
  recycled-draft_probs bug's broken accept test, a drop is slower serving).

`regressions` lists the practical regressions and changes; a step is "open" when it is the
latest step of its trend, i.e. the series still sits at the new level.  The result is the typed
`Trends` (specsuite.results.types): specsuite/reports/trends.py draws its figures and regressions.md from it, and
its ``to_dict()`` is trends.json.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import replace
from datetime import datetime, timezone

from specsuite.families.registry import metric as registered_metric
from specsuite.history.metrics import MetricRecord
from specsuite.history.runs import RunRecord, config_differences
from specsuite.history.steps import DEFAULT_ALPHA, DEFAULT_MIN_SIZE, ChangePoint, check_parameters, detect_steps, segment_means
from specsuite.history.store import HistoryStore
from specsuite.results.types import (
    SeriesRun,
    StepEffect,
    Trend,
    TrendPoint,
    Trends,
    TrendSegment,
    TrendSeries,
    TrendStep,
    VersionChange,
)

TEST_NAME = ("binary segmentation over steps and transients; Student's two-sample t-test per candidate, "
             "weighted Bonferroni over the candidates searched")


def series_key(run: RunRecord) -> str:
    return f"{run.arm}-{run.config_key}"


def _effect(metric: str, before: float, after: float) -> tuple[float | None, bool]:
    """(effect on the metric's scale, practically large?) for a step from `before` to `after`."""
    registered = registered_metric(metric)
    scale, threshold = registered.scale, registered.threshold
    if scale == "difference":
        change = after - before
        return change, abs(change) > threshold
    if before == 0:
        return None, after != 0  # from zero, any change is large; the ratio is undefined
    if scale == "ratio":
        ratio = after / before
        return ratio, ratio == 0 or abs(math.log(ratio)) > math.log1p(threshold)
    relative = after / before - 1.0
    return relative, abs(relative) > threshold


def _kind(direction: str, before: float, after: float) -> str:
    if direction == "either":
        return "change"
    worse = after > before if direction == "lower" else after < before
    return "regression" if worse else "improvement"


def _run_summary(run: RunRecord, position: int) -> SeriesRun:
    return SeriesRun.written(id=run.id, position=position, started_utc=run.started_utc, label=run.label, build_hash=run.build_hash,
                             server_version=run.server_version, outcome=run.outcome, results_run_id=run.results_run_id, node=run.node)


def _stretches(points: list[tuple[int, MetricRecord]]) -> list[list[tuple[int, MetricRecord]]]:
    """Consecutive points with one metric version."""
    stretches: list[list[tuple[int, MetricRecord]]] = []
    for point in points:
        if stretches and stretches[-1][-1][1].version == point[1].version:
            stretches[-1].append(point)
        else:
            stretches.append([point])
    return stretches


def _step_entry(metric: MetricRecord, point: ChangePoint, stretch: list[tuple[int, MetricRecord]], runs: list[RunRecord],
                alpha: float) -> TrendStep:
    position = stretch[point.index][0]
    previous = stretch[point.index - 1][0]
    effect, practical = _effect(metric.name, point.before_mean, point.after_mean)
    run, registered = runs[position], registered_metric(metric.name)
    return TrendStep.written(
        metric=metric.name, label=registered.label, unit=metric.unit, direction=metric.direction,
        case_id=metric.case_id, metric_version=metric.version,
        position=position, night=position + 1, run_id=run.id, started_utc=run.started_utc, build_hash=run.build_hash,
        label_at_step=run.label, previous_run_id=runs[previous].id, previous_label=runs[previous].label,
        before_mean=point.before_mean, after_mean=point.after_mean, before_nights=point.before_n, after_nights=point.after_n,
        effect=StepEffect.written(scale=registered.scale, value=effect, from_zero=point.before_mean == 0 and effect is None),
        threshold=registered.threshold, practical=practical, kind=_kind(metric.direction, point.before_mean, point.after_mean),
        shape=point.kind, statistic=point.statistic, p_value=point.p_value, p_adjusted=point.p_adjusted,
        candidates_searched=point.candidates,
        alpha=alpha, test=TEST_NAME, open=False,
    )


def _trend(name: str, case_id: str, points: list[tuple[int, MetricRecord]], runs: list[RunRecord], alpha: float,
           min_size: int) -> Trend:
    newest = points[-1][1]  # the newest record names the metric's current unit and direction
    steps: list[TrendStep] = []
    segments: list[TrendSegment] = []
    version_changes: list[VersionChange] = []
    notes: list[str] = []
    usable = [(pos, rec) for pos, rec in points if rec.value is not None and math.isfinite(rec.value)]
    stretches = _stretches(usable)
    for earlier, later in zip(stretches, stretches[1:], strict=False):
        version_changes.append(VersionChange.written(position=later[0][0], from_version=earlier[-1][1].version,
                                                     to_version=later[0][1].version))
    for number, stretch in enumerate(stretches, start=1):
        values = [rec.value for _, rec in stretch]
        if len(values) < 2 * min_size:
            notes.append(f"metric version {stretch[0][1].version}: {len(values)} nights, fewer than the {2 * min_size} a step needs")
            found = []
        else:
            found = detect_steps(values, alpha=alpha, min_size=min_size)
        entries = [_step_entry(stretch[point.index][1], point, stretch, runs, alpha) for point in found]
        if entries and number == len(stretches):
            entries[-1].open = True  # the newest level of the current metric version
        steps += entries
        for start, end, mean in segment_means(values, found):
            segments.append(TrendSegment.written(start_position=stretch[start][0], end_position=stretch[end - 1][0], mean=mean))
    return Trend.written(
        metric=name, label=registered_metric(name).label, unit=newest.unit, direction=newest.direction, case_id=case_id,
        temperature=newest.temperature, top_p=newest.top_p,
        points=[TrendPoint.written(position=pos, run_id=runs[pos].id, value=rec.value, ci_low=rec.ci_low, ci_high=rec.ci_high,
                                   k=rec.k, n=rec.n, version=rec.version) for pos, rec in points],
        segments=segments, version_changes=version_changes, steps=steps, notes=notes,
    )


def analyse(
    store: HistoryStore,
    *,
    arm: str | None = None,
    accelerator: str | None = None,
    config_key: str | None = None,
    since: str | None = None,
    latest: int | None = None,
    metrics: list[str] | None = None,
    alpha: float = DEFAULT_ALPHA,
    min_size: int = DEFAULT_MIN_SIZE,
) -> Trends:
    """Trends, steps and regressions of every series in the store matching the filters."""
    check_parameters(alpha, min_size)
    runs = store.runs(arm=arm, accelerator=accelerator, config_key=config_key, since=since)
    grouped: dict[str, list[RunRecord]] = defaultdict(list)
    for run in runs:
        grouped[series_key(run)].append(run)
    records = store.metrics_by_run([run.id for run in runs])
    series = []
    for key, members in grouped.items():
        members = members[-latest:] if latest else members
        by_metric: dict[tuple[str, str], list[tuple[int, MetricRecord]]] = defaultdict(list)
        for position, run in enumerate(members):
            for record in records[run.id]:
                if metrics is None or record.name in metrics:
                    by_metric[(record.name, record.case_id)].append((position, record))
        trends = [_trend(name, case_id, points, members, alpha, min_size)
                  for (name, case_id), points in sorted(by_metric.items(), key=lambda item: (item[0][0], item[1][0][1].temperature,
                                                                                               item[1][0][1].top_p))]
        newest = members[-1]
        series.append(TrendSeries.written(
            key=key, arm=newest.arm, config_key=newest.config_key, config=newest.config, model=newest.model,
            accelerator=newest.accelerator, profile=newest.profile, nights=len(members),
            first_utc=members[0].started_utc, last_utc=newest.started_utc,
            runs=[_run_summary(run, position) for position, run in enumerate(members)], trends=trends,
        ))
    series.sort(key=lambda s: (-s.nights, s.key))
    for entry in series[1:]:
        entry.put("differs_from_first", config_differences(series[0].config, entry.config))
    steps = [_in_series(step, s.key) for s in series for trend in s.trends for step in trend.steps]
    flagged = [step for step in steps if step.practical and step.kind in ("regression", "change")]
    return Trends.written(
        generated_utc=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        store=store.url,
        filters={"arm": arm, "accelerator": accelerator, "config_key": config_key, "since": since, "latest": latest, "metrics": metrics},
        alpha=alpha, min_size=min_size, test=TEST_NAME,
        series=series,
        steps=steps,
        regressions=flagged,
        open_regressions=[step for step in flagged if step.open],
    )


def _in_series(step: TrendStep, series: str) -> TrendStep:
    """A copy of a trend's step that names its series (the analysis's step lists; the trend's own step stays as it is)."""
    named = replace(step)
    named.put("series", series)
    return named
