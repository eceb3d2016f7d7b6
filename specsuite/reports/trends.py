"""Nightly trend figures and the regression list, from the history's typed trends.

Input: the `Trends` of specsuite.results.types (specsuite.history.analysis.analyse; its dict is the
trends.json `specsuite history` writes): `series[] -> trends[] -> points / segments / steps /
version_changes`, plus `regressions` and `steps`.  Output, under the chosen folder:

- `trends/<series key>/<metric>.png`: one figure per metric, one panel per sampling case: each
  night's value with its 95 % interval, the level of each segment between steps, a red dashed
  line at every detected step (labelled with its kind, effect and adjusted p-value), a grey
  dotted line where the metric's definition (version) changed, and hollow markers for nights
  whose checks failed;
- `regressions.md`: the open and past regressions, every other detected step, and the series
  (configurations are never mixed; the list says how series differ).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # before anything draws: never look for a display

import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from specsuite.results.types import SeriesRun, StepEffect, Trend, Trends, TrendSeries, TrendStep  # noqa: E402

DPI = 110
STYLE = {"font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "xtick.labelsize": 9, "ytick.labelsize": 9,
         "figure.titlesize": 13, "axes.grid": True, "grid.alpha": 0.3}
PERCENT_UNITS = {"per generated token", "per committed token", "fraction correct", "fraction invalid"}
POINT_COLOR = "#1f77b4"
LEVEL_COLOR = "#2ca02c"
REGRESSION_COLOR = "#d62728"
STEP_COLORS = {"regression": REGRESSION_COLOR, "change": REGRESSION_COLOR, "improvement": "#2ca02c"}
LABEL_CHARS = 12
LEGEND = [
    Line2D([], [], color=POINT_COLOR, marker="o", linestyle="none", label="night, 95 % CI"),
    Line2D([], [], color=POINT_COLOR, marker="o", markerfacecolor="white", linestyle="none", label="night with failed checks"),
    Line2D([], [], color=LEVEL_COLOR, linewidth=2, label="level between steps"),
    Line2D([], [], color=REGRESSION_COLOR, linestyle="--", label="detected step"),
]
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _safe(name: str) -> str:
    return _UNSAFE.sub("_", name).strip("_") or "series"


def display_unit(unit: str | None) -> tuple[float, str]:
    """(multiplier, axis label) for a metric unit: per-token rates and fractions (a lossless test's repeats passed) in percent."""
    unit = unit or ""
    if unit in PERCENT_UNITS or unit.startswith("fraction "):
        return 100.0, f"% ({unit})" if unit.startswith("per") else "%"
    return 1.0, unit


def format_effect(step: TrendStep, scale: float = 1.0) -> str:
    """A step's effect in words: `x4.20`, `from 0 to 2.93 %`, `+5.1 %`, `-3.4 pt`; `scale` 100 shows percent."""
    effect = step.effect or StepEffect()
    value = effect.value
    suffix = " %" if scale == 100.0 else ""
    if value is None:
        return f"from {_level(step.before_mean) * scale:.3g} to {_level(step.after_mean) * scale:.3g}{suffix}"
    if effect.scale == "ratio":
        return f"x{value:.3g}"
    if effect.scale == "relative":
        return f"{value * 100:+.1f} %"
    return f"{value * scale:+.3g}{' pt' if scale == 100.0 else ''}"


def _level(mean: float | None) -> float:
    """A level as drawn: the analysis always writes one; a step or segment read without it counts as zero."""
    return mean or 0.0


def _format_p(p: float | None) -> str:
    p = 1.0 if p is None else p  # the analysis always adjusts; an unadjusted step reads as not significant
    return "0" if p == 0 else f"{p:.1e}" if p < 0.001 else f"{p:.3f}"


def _tick_labels(runs: list[SeriesRun]) -> list[str]:
    labels = []
    for run in runs:
        text = str(run.label or "")
        text = text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"
        date = str(run.started_utc or "")[5:10]
        labels.append(f"{run.position + 1}\n{text}\n{date}")
    return labels


def _panel(ax: Any, trend: Trend, runs: list[SeriesRun]) -> None:
    scale, ylabel = display_unit(trend.unit)
    failed = {run.position for run in runs if run.outcome == "failed"}
    points = [p for p in trend.points if p.value is not None]
    x = np.array([p.position + 1 for p in points], dtype=float)
    y = np.array([p.value * scale for p in points], dtype=float)  # type: ignore[operator]  (None filtered out above)
    with_ci = [i for i, p in enumerate(points) if p.ci_low is not None and p.ci_high is not None]
    if with_ci:
        low = np.array([points[i].ci_low * scale for i in with_ci])  # type: ignore[operator]
        high = np.array([points[i].ci_high * scale for i in with_ci])  # type: ignore[operator]
        ax.errorbar(x[with_ci], y[with_ci], yerr=[np.maximum(0.0, y[with_ci] - low), np.maximum(0.0, high - y[with_ci])], fmt="none",
                    ecolor=POINT_COLOR, elinewidth=1.2, capsize=3, alpha=0.8)
    hollow = np.array([p.position in failed for p in points], dtype=bool)
    ax.plot(x[~hollow], y[~hollow], "o", color=POINT_COLOR, markersize=6, zorder=3)
    ax.plot(x[hollow], y[hollow], "o", color=POINT_COLOR, markersize=6, markerfacecolor="white", zorder=3)
    for segment in trend.segments:
        ax.hlines(_level(segment.mean) * scale, segment.start_position + 0.6, segment.end_position + 1.4, colors=LEVEL_COLOR,
                  linewidth=2, alpha=0.8, zorder=2)
    for change in trend.version_changes:
        ax.axvline(change.position + 0.5, color="grey", linestyle=":", linewidth=1.5)
        ax.annotate(f"metric v{change.from_version} -> v{change.to_version}", (change.position + 0.55, 0.02),
                    xycoords=("data", "axes fraction"), fontsize=8, color="grey")
    for step in trend.steps:
        color = STEP_COLORS.get(step.kind, REGRESSION_COLOR) if step.practical else "grey"
        line_x = step.position + 0.5
        ax.axvline(line_x, color=color, linestyle="--", linewidth=1.8)
        # Text on the roomier side of the line, so it stays inside the panel.
        right_half = step.position > len(runs) / 2
        ax.annotate(f"{step.kind} at night {step.night}: {format_effect(step, scale)}\np_adj={_format_p(step.p_adjusted)}",
                    (line_x - 0.08 if right_half else line_x + 0.08, 0.95), xycoords=("data", "axes fraction"), fontsize=9, color=color,
                    fontweight="bold", va="top", ha="right" if right_half else "left")
    ax.set_title(f"{trend.case_id}" + ("" if trend.steps else "  (no step)"), loc="left")
    ax.set_ylabel(ylabel)
    top = max([*y, *(high if with_ci else [])], default=1.0)
    ax.set_ylim(bottom=min([0.0, *y]), top=top * 1.25 if top > 0 else 1.0)


def render_metric(series: TrendSeries, metric: str, trends: list[Trend], path: Path) -> Path:
    """One figure: the metric's trend in every sampling case of the series."""
    runs = series.runs
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(max(8.0, 0.75 * len(runs) + 3), 2.4 * len(trends) + 1.95), dpi=DPI)
        axes = fig.subplots(len(trends), 1, sharex=True, squeeze=False)[:, 0]
        for ax, trend in zip(axes, trends, strict=False):
            _panel(ax, trend, runs)
        axes[-1].set_xticks(range(1, len(runs) + 1))
        axes[-1].set_xticklabels(_tick_labels(runs))
        axes[-1].set_xlim(0.4, len(runs) + 0.6)
        axes[-1].set_xlabel("night (build, date); hollow: checks failed")
        first = trends[0]
        fig.suptitle(f"{first.label} - {series.arm} on {series.accelerator or 'unrecorded accelerator'} "
                     f"(config {series.config_key})")
        width, height = fig.get_size_inches()
        fig.legend(handles=LEGEND, loc="upper right", bbox_to_anchor=(0.99, 1 - 0.42 / height), ncol=len(LEGEND), fontsize=8, frameon=False)
        # Fixed margins in inches (tight_layout would measure every label: slow, and no better here).
        fig.subplots_adjust(left=0.85 / width, right=1 - 0.25 / width, top=1 - 0.95 / height, bottom=1.0 / height,
                            hspace=0.45)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path)
    return path


def render_trends(trends: Trends, out_dir: str | Path) -> list[Path]:
    """Every metric figure of every series, and regressions.md; returns the paths written.

    Each series of `trends` gets `figures` ({metric: path relative to `out_dir`}) so a trends.json
    written afterwards links its figures.
    """
    out = Path(out_dir)
    written = []
    for series in trends.series:
        by_metric: dict[str, list[Trend]] = {}
        for trend in series.trends:
            by_metric.setdefault(trend.metric, []).append(trend)
        figures: dict[str, str] = {}
        series.put("figures", figures)
        for metric, metric_trends in by_metric.items():
            path = render_metric(series, metric, metric_trends, out / "trends" / _safe(series.key) / f"{_safe(metric)}.png")
            figures[metric] = str(path.relative_to(out))
            written.append(path)
    markdown = out / "regressions.md"
    markdown.write_text(regressions_markdown(trends), encoding="utf-8")
    written.append(markdown)
    return written


def _step_row(step: TrendStep) -> str:
    scale, _ = display_unit(step.unit)
    suffix = " %" if scale == 100.0 else ""
    return (f"| {step.label} | {step.case_id} | {step.series} | night {step.night} ({step.label_at_step or '-'}, "
            f"{step.started_utc}) | {_level(step.before_mean) * scale:.4g}{suffix} -> {_level(step.after_mean) * scale:.4g}{suffix} | "
            f"{format_effect(step, scale)} | {_format_p(step.p_adjusted)} | {'yes' if step.open else 'no'} |")


STEP_HEADER = ("| metric | case | series | first night at the new level | level before -> after | effect | p (adjusted) | open |\n"
               "|---|---|---|---|---|---|---|---|")


def regressions_markdown(trends: Trends) -> str:
    """The regression list, other steps, series and figures as Markdown."""
    lines = ["# Nightly history: regressions", "",
             f"Store `{trends.store}`, generated {trends.generated_utc}. Step detection: {trends.test}; "
             f"alpha {trends.alpha}, at least {trends.min_size} nights on each side of a step. A step counts when it also "
             "passes the metric's practical threshold. Open: the trend still sits at the new level.", ""]
    regressions = trends.regressions
    if regressions:
        lines += [f"## Regressions ({len(regressions)}, {len(trends.open_regressions)} open)", "", STEP_HEADER]
        lines += [_step_row(step) for step in sorted(regressions, key=lambda s: (not s.open, s.started_utc, s.metric))]
    else:
        lines += ["## Regressions", "", "None detected."]
    flagged = [step.to_dict() for step in regressions]  # compared as written: every key, not only the ones drawn
    others = [step for step in trends.steps if step.to_dict() not in flagged]
    if others:
        lines += ["", "## Other steps (improvements, or below the practical threshold)", "", STEP_HEADER]
        lines += [_step_row(step) for step in others]
    lines += ["", "## Series", "",
              "Runs of different configurations (model, vocabulary, speculative settings, CUDA graphs, parallelism, profile, "
              "accelerator) are separate series and are never compared with each other.", "",
              "| series | arm | model | accelerator | profile | nights | first | last |", "|---|---|---|---|---|---|---|---|"]
    for series in trends.series:
        lines.append(f"| {series.key} | {series.arm} | {series.model} | {series.accelerator or '-'} | "
                     f"{series.profile or '-'} | {series.nights} | {series.first_utc} | {series.last_utc} |")
    for series in trends.series:
        if series.differs_from_first:
            lines.append(f"\n`{series.key}` differs from `{trends.series[0].key}` in: " + "; ".join(series.differs_from_first))
    for series in trends.series:
        lines += ["", f"### {series.key}", ""]
        lines += [f"![{metric}]({path})" for metric, path in sorted(series.figures.items())]
        notes = sorted({f"{trend.label} {trend.case_id}: {note}" for trend in series.trends for note in trend.notes})
        lines += [f"- {note}" for note in notes]
    return "\n".join(lines) + "\n"
