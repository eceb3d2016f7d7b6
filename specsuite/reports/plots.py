"""PNG figures of an A/B results document (matplotlib, Agg canvas, no display needed).

Each workload family declares its figures in the analysis (`FamilyFacts.figures`, a `FigureSpec` each: the
correctness family's event rates per sampling case and accept length against temperature, GSM8K's accuracy and
invalid rate, the bench's ITL ECDF); a generic renderer per figure kind draws them from the analysis alone, and
the spread between repeats comes last.  A figure whose data is absent is skipped with its one-line note instead;
one whose workload did not run (GSM8K, the bench, a second repeat) is skipped silently, since the report names
what did not run in one line.  Each arm keeps one colour in every figure.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before anything draws: never look for a display

import numpy as np  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from specsuite.reports.blocks import FigureRef  # noqa: E402
from specsuite.reports.document import kind_of, metric_fact  # noqa: E402
from specsuite.results.types import (  # noqa: E402
    ECDF,
    ESTIMATES_AGAINST_TEMPERATURE,
    ESTIMATES_PER_CASE,
    Comparison,
    Document,
    FigureSpec,
    SpreadEntry,
)

DPI = 110
STYLE = {"font.size": 11, "axes.titlesize": 12, "axes.labelsize": 11, "legend.fontsize": 10, "xtick.labelsize": 10,
         "ytick.labelsize": 10, "figure.titlesize": 14, "axes.grid": True, "grid.alpha": 0.3}
PALETTE = ("#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


def arm_colors(arms: list[str]) -> dict[str, str]:
    """One colour per arm, by run order, shared by every figure."""
    return {arm: PALETTE[i % len(PALETTE)] for i, arm in enumerate(arms)}


def _scale(analysis: Comparison, metric: str) -> float:
    return 100.0 if kind_of(analysis, metric) in ("token_rate", "proportion") else 1.0


def _label_panel(ax: Axes, analysis: Comparison, metric: str) -> None:
    """A panel's title and y axis: the registry's `plot_title` and `axis_label`, carried in the analysis."""
    ax.set_title(metric_fact(analysis, metric, "plot_title"))
    ax.set_ylabel(metric_fact(analysis, metric, "axis_label"))


def _offsets(count: int, width: float = 0.36) -> list[float]:
    if count == 1:
        return [0.0]
    return list(np.linspace(-width / 2, width / 2, count))


def _case_axis(ax: Axes, cases: list[tuple[float, float]]) -> None:
    ax.set_xticks(range(len(cases)))
    ax.set_xticklabels([f"T={t:g}\ntop_p={p:g}" for t, p in cases])
    ax.set_xlim(-0.6, len(cases) - 0.4)
    ax.set_xlabel("sampling case")


def _legend_handles(arms: list[str], colors: dict[str, str], baseline: str | None) -> list[Line2D]:
    return [Line2D([], [], color=colors[a], marker="o", linestyle="", markersize=8,
                   label=f"{a} ({'baseline' if a == baseline else 'candidate'})") for a in arms]


def _save(fig: Figure, path: Path) -> Path:
    fig.savefig(path, dpi=DPI)
    return path


def _grid(count: int, panel_size: tuple[float, float] = (5.4, 4.0)) -> tuple[Figure, list[Axes]]:
    cols = 1 if count == 1 else 2 if count <= 4 else 3
    rows = math.ceil(count / cols)
    fig = Figure(figsize=(panel_size[0] * cols, panel_size[1] * rows + 0.8), layout="constrained")
    axes = list(np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).ravel())
    for extra in axes[count:]:
        extra.set_visible(False)
    return fig, axes[:count]


def _estimate_points(ax: Axes, analysis: Comparison, metric: str, cases: list[tuple[float, float]],
                     colors: dict[str, str]) -> None:
    """Each arm's pooled value per case with its 95 % interval as an error bar."""
    arms = analysis.arm_order
    rows = {(r.arm, r.temperature, r.top_p): r for r in analysis.estimates if r.metric == metric}
    scale = _scale(analysis, metric)
    for arm, offset in zip(arms, _offsets(len(arms)), strict=True):
        xs, ys, low, high = [], [], [], []
        for i, (t, p) in enumerate(cases):
            row = rows.get((arm, t, p))
            if row is None or row.value is None:
                continue
            ci = [row.value if bound is None else bound for bound in (row.ci or [None, None])]
            xs.append(i + offset)
            ys.append(row.value * scale)
            low.append(max(0.0, (row.value - ci[0]) * scale))
            high.append(max(0.0, (ci[1] - row.value) * scale))
        if xs:
            ax.errorbar(xs, ys, yerr=[low, high], color=colors[arm], marker="o", markersize=7, linestyle="",
                        capsize=5, elinewidth=1.6)
    _zero_visible(ax)


def _zero_visible(ax: Axes) -> None:
    """Start the axis a little below zero so points at zero are drawn whole."""
    top = ax.get_ylim()[1]
    ax.set_ylim(-0.03 * top, top)


def plot_estimates_per_case(spec: FigureSpec, analysis: Comparison, out_dir: Path) -> FigureRef | str | None:
    """A panel per metric the analysis holds: each arm's pooled value per sampling case with its interval."""
    present = {r.metric for r in analysis.estimates}
    metrics = [m for m in spec.metrics if m in present]
    if not metrics:
        return spec.absent_note
    cases = _all_cases(analysis, metrics)
    colors = arm_colors(analysis.arm_order)
    fig, axes = _grid(len(metrics))
    for ax, metric in zip(axes, metrics, strict=False):
        _estimate_points(ax, analysis, metric, cases, colors)
        _case_axis(ax, cases)
        _label_panel(ax, analysis, metric)
    if spec.first_panel_ylim:
        axes[0].set_ylim(*spec.first_panel_ylim)
    fig.suptitle(spec.figure_title)
    fig.legend(handles=_legend_handles(analysis.arm_order, colors, analysis.baseline), loc="outside lower center",
               ncols=len(analysis.arm_order))
    path = _save(fig, out_dir / spec.file)
    return FigureRef(path, spec.title, spec.caption)


def plot_estimates_against_temperature(spec: FigureSpec, analysis: Comparison, out_dir: Path) -> FigureRef | str | None:
    """One metric against temperature: a line per arm and top_p, each point with its interval."""
    metric = spec.metrics[0] if spec.metrics else ""
    rows = [r for r in analysis.estimates if r.metric == metric]
    if not rows:
        return spec.absent_note
    colors = arm_colors(analysis.arm_order)
    top_ps = sorted({r.top_p for r in rows if r.temperature > 0}) or [1.0]
    # Each top_p its own line style AND marker, and a long legend handle: a short dashed handle reads as solid.
    styles = dict(zip(reversed(top_ps), ("-", (0, (6, 3)), ":", "-."), strict=False))
    markers = dict(zip(reversed(top_ps), ("o", "s", "^", "D"), strict=False))
    fig = Figure(figsize=(8.5, 5.2), layout="constrained")
    ax = fig.subplots()
    for arm in analysis.arm_order:
        greedy = [r for r in rows if r.arm == arm and r.temperature == 0]
        for top_p in top_ps:
            # Greedy decoding ignores top_p, so T=0 starts every top_p line.
            line = sorted(greedy + [r for r in rows if r.arm == arm and r.temperature > 0 and r.top_p == top_p],
                          key=lambda r: r.temperature)
            if not line:
                continue
            xs = [r.temperature for r in line]
            ys = [r.value for r in line]
            low = [r.value - (r.ci or [r.value] * 2)[0] for r in line]
            high = [(r.ci or [r.value] * 2)[1] - r.value for r in line]
            ax.errorbar(xs, ys, yerr=[low, high], color=colors[arm], linestyle=styles[top_p], marker=markers[top_p], markersize=7,
                        capsize=5, linewidth=2, label=f"{arm}, top_p={top_p:g} ({'solid' if styles[top_p] == '-' else 'dashed'})"
                        if len(top_ps) == 2 else f"{arm}, top_p={top_p:g}")
    ax.set_xlabel(spec.x_label or "temperature")
    ax.set_ylabel(spec.y_label or metric_fact(analysis, metric, "axis_label"))
    ax.set_title(spec.figure_title)
    ax.legend(loc="best", handlelength=4.5)
    path = _save(fig, out_dir / spec.file)
    return FigureRef(path, spec.title, spec.caption)


def plot_ecdf(spec: FigureSpec, analysis: Comparison, out_dir: Path) -> FigureRef | str | None:
    """A panel per `EcdfPanel`: each arm's values as an empirical CDF up to the 99.5th percentile, its median dashed."""
    panels = [panel for panel in spec.panels if any(panel.series.values())]
    if not panels:
        return spec.absent_note
    colors = arm_colors(analysis.arm_order)
    fig, axes = _grid(len(panels), (7.5, 4.8))
    for ax, panel in zip(axes, panels, strict=False):
        arms = panel.series
        top = max(np.percentile(v, 99.5) for v in arms.values() if v)
        for arm in analysis.arm_order:
            values = np.sort(arms.get(arm) or [])
            if values.size == 0:
                continue
            ax.step(values, np.arange(1, values.size + 1) / values.size, where="post", color=colors[arm], linewidth=2,
                    label=f"{arm} (median {np.median(values):.3g} {spec.unit}, n={values.size:,})")
            ax.axvline(float(np.median(values)), color=colors[arm], linestyle="--", linewidth=1)
        ax.set_xlim(0, top)
        ax.set_ylim(0, 1)
        ax.set_xlabel(spec.x_label)
        ax.set_ylabel(spec.y_label)
        ax.set_title(panel.title)
        ax.legend(loc="lower right")
    path = _save(fig, out_dir / spec.file)
    return FigureRef(path, spec.title, spec.caption)


# The renderer of each figure kind a family can declare.
RENDERERS: dict[str, Callable[[FigureSpec, Comparison, Path], FigureRef | str | None]] = {
    ESTIMATES_PER_CASE: plot_estimates_per_case, ESTIMATES_AGAINST_TEMPERATURE: plot_estimates_against_temperature,
    ECDF: plot_ecdf}


def declared_figures(analysis: Comparison) -> list[tuple[str, FigureSpec]]:
    """(family, figure) for every figure the families declare, in page order (`place`; ties in registration order)."""
    found = [(name, spec) for name, facts in analysis.families.items() for spec in facts.figures]
    return sorted(found, key=lambda item: item[1].place)


def plot_declared(name: str, spec: FigureSpec, analysis: Comparison, out_dir: Path) -> FigureRef | str | None:
    """One declared figure, or why not: silently nothing when its family did not run and it needs it, or of an unknown kind."""
    renderer = RENDERERS.get(spec.kind)
    if renderer is None or (spec.when_run and not analysis.ran(name)):
        return None
    return renderer(spec, analysis, out_dir)


def _event_rate_metrics(analysis: Comparison) -> set[str]:
    return {metric for _, spec in declared_figures(analysis) if spec.event_rates for metric in spec.metrics}


def plot_spread(document: Document, analysis: Comparison, out_dir: Path) -> FigureRef | str | None:
    spread = analysis.repeat_spread or {}
    metrics = [m for m in analysis.spread_rows or spread if spread.get(m)]
    if not metrics:
        return "Spread figure: no per-repeat values in these results."
    if (document.repeats or 1) < 2 and _most_repeats(spread) < 2:
        return None  # one dot per arm shows no spread
    colors = arm_colors(analysis.arm_order)
    event_rates = _event_rate_metrics(analysis)
    fig, axes = _grid(len(metrics))
    most = 1
    for ax, metric in zip(axes, metrics, strict=False):
        entries = spread[metric]
        cases = sorted({(e.temperature, e.top_p) for arms in entries.values() for e in arms.values()})
        scale = _scale(analysis, metric)
        for arm, offset in zip(analysis.arm_order, _offsets(len(analysis.arm_order)), strict=True):
            for i, case in enumerate(cases):
                entry = next((arms[arm] for arms in entries.values() if arm in arms
                              and (arms[arm].temperature, arms[arm].top_p) == case), None)
                if entry is None:
                    continue
                values = np.array(entry.values) * scale
                most = max(most, values.size)
                x = i + offset
                ax.vlines(x, values.min(), values.max(), color=colors[arm], linewidth=3, alpha=0.5)
                ax.scatter(x + np.linspace(-0.04, 0.04, values.size) * (values.size > 1), values, color=colors[arm],
                           s=36, zorder=3, edgecolors="white", linewidths=0.6)
        _case_axis(ax, cases)
        _label_panel(ax, analysis, metric)
        if metric in event_rates:
            _zero_visible(ax)
        else:
            ax.margins(y=0.25)  # the spread is the point here, so no zero baseline
    note = "" if most > 1 else "\none repeat per arm: no spread measured (rerun with --repeats N)"
    fig.suptitle(f"Spread between repeats: a dot per repeat, a bar from min to max{note}")
    fig.legend(handles=_legend_handles(analysis.arm_order, colors, analysis.baseline), loc="outside lower center",
               ncols=len(analysis.arm_order))
    path = _save(fig, out_dir / "repeat_spread.png")
    return FigureRef(path, "Spread between repeats",
                     "Each dot is one repeat's value; GSM8K accuracy on one unchanged server can span 0.920–0.945 over three repeats.")


def _most_repeats(spread: dict[str, dict[str, dict[str, SpreadEntry]]]) -> int:
    return max((len(entry.values or []) for cases in spread.values() for arms in cases.values() for entry in arms.values()),
               default=0)


def _all_cases(analysis: Comparison, metrics: list[str]) -> list[tuple[float, float]]:
    return sorted({(r.temperature, r.top_p) for r in analysis.estimates if r.metric in metrics})


def render_plots(document: Document, out_dir: Path) -> tuple[list[FigureRef], list[str]]:
    """Write every figure the data allows into out_dir: the families' declared figures in page order, then the spread
    between repeats; notes say which were skipped and why."""
    analysis = document.analysis
    if analysis is None:
        return [], ["Figures: not drawn, the results file holds no A/B analysis."]
    figures, notes = [], []
    with matplotlib.rc_context(STYLE):
        outcomes = [plot_declared(name, spec, analysis, out_dir) for name, spec in declared_figures(analysis)]
        for outcome in [*outcomes, plot_spread(document, analysis, out_dir)]:
            if outcome is not None:
                (figures if isinstance(outcome, FigureRef) else notes).append(outcome)
    return figures, notes
