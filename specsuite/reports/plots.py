"""PNG figures of an A/B results document (matplotlib, Agg canvas, no display needed).

Figures: event rates per sampling case and arm with 95 % intervals; accept length against
temperature per arm; the ITL ECDF per arm (bench results with per-token ITLs only); GSM8K accuracy
and invalid rate with intervals (GSM8K results only); the spread between repeats.  A figure whose
data is absent is skipped with a one-line note instead; one whose workload did not run (GSM8K, the
bench, a second repeat) is skipped silently, since the report names what did not run in one line.
Each arm keeps one colour in every figure.
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
from specsuite.reports.document import case_title, kind_of, metric_fact  # noqa: E402
from specsuite.results.types import Comparison, Document, SpreadEntry  # noqa: E402

DPI = 110
STYLE = {"font.size": 11, "axes.titlesize": 12, "axes.labelsize": 11, "legend.fontsize": 10, "xtick.labelsize": 10,
         "ytick.labelsize": 10, "figure.titlesize": 14, "axes.grid": True, "grid.alpha": 0.3}
PALETTE = ("#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
RATE_PANELS = ("invalid_ids", "fallback_ids", "sampler_fallbacks", "stray_per_1200", "nonfinite_draft_probs", "fragment_excess")


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


def plot_rates(document: Document, analysis: Comparison, out_dir: Path) -> FigureRef | str:
    present = {r.metric for r in analysis.estimates}
    metrics = [m for m in RATE_PANELS if m in present]
    if not metrics:
        return "Event-rate figure: no detector or counter data in these results."
    cases = _all_cases(analysis, metrics)
    colors = arm_colors(analysis.arm_order)
    fig, axes = _grid(len(metrics))
    for ax, metric in zip(axes, metrics, strict=False):
        _estimate_points(ax, analysis, metric, cases, colors)
        _case_axis(ax, cases)
        _label_panel(ax, analysis, metric)
    fig.suptitle("Event rates per sampling case and arm (pooled over repeats, 95% CI)")
    fig.legend(handles=_legend_handles(analysis.arm_order, colors, analysis.baseline), loc="outside lower center",
               ncols=len(analysis.arm_order))
    path = _save(fig, out_dir / "rates.png")
    return FigureRef(path, "Event rates per sampling case",
                     "Points are pooled rates; bars are 95% Clopper–Pearson intervals (non-finite entries per batch: "
                     "point only). A zero with a bar is 'none seen, and at most this much'.")


def plot_accept_length(document: Document, analysis: Comparison, out_dir: Path) -> FigureRef | str:
    rows = [r for r in analysis.estimates if r.metric == "accept_length"]
    if not rows:
        return "Accept-length figure: these results hold no per-request accept lengths."
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
    ax.set_xlabel("temperature")
    ax.set_ylabel("accept length (tokens per verify step)")
    ax.set_title("Accept length against temperature (mean of requests, 95% CI)")
    ax.legend(loc="best", handlelength=4.5)
    path = _save(fig, out_dir / "accept_length.png")
    return FigureRef(path, "Accept length against temperature",
                     "Healthy acceptance does not rise with temperature; a rise towards the ceiling is the signature "
                     "of corrupt draft probabilities accepted by the sampler.")


def _bench_itls(document: Document) -> dict[str, dict[str, list[float]]]:
    """case -> arm -> pooled per-token ITLs in ms, from the raw bench results."""
    pooled: dict[str, dict[str, list[float]]] = {}
    for arm_name, arm in document.arms.items():
        for repeat in arm.repeats:
            for run in repeat.workloads.bench_runs():
                key = case_title(run.temperature(), run.top_p())
                values = [x * 1000.0 for request in run.itls or [] for x in request or [] if x and x > 0]
                pooled.setdefault(key, {}).setdefault(arm_name, []).extend(values)
    return {key: arms for key, arms in pooled.items() if any(arms.values())}


def plot_itl_ecdf(document: Document, analysis: Comparison, out_dir: Path) -> FigureRef | str | None:
    if not analysis.ran("bench"):
        return None
    settings = _bench_itls(document)
    if not settings:
        return "ITL ECDF: not drawn, the bench results carry no per-token ITLs (`itls`)."
    colors = arm_colors(analysis.arm_order)
    fig, axes = _grid(len(settings), (7.5, 4.8))
    for ax, (title, arms) in zip(axes, settings.items(), strict=False):
        top = max(np.percentile(v, 99.5) for v in arms.values() if v)
        for arm in analysis.arm_order:
            values = np.sort(arms.get(arm) or [])
            if values.size == 0:
                continue
            ax.step(values, np.arange(1, values.size + 1) / values.size, where="post", color=colors[arm], linewidth=2,
                    label=f"{arm} (median {np.median(values):.3g} ms, n={values.size:,})")
            ax.axvline(float(np.median(values)), color=colors[arm], linestyle="--", linewidth=1)
        ax.set_xlim(0, top)
        ax.set_ylim(0, 1)
        ax.set_xlabel("inter-token latency (ms), up to the 99.5th percentile")
        ax.set_ylabel("fraction of tokens ≤ x")
        ax.set_title(f"ITL ECDF, {title}")
        ax.legend(loc="lower right")
    path = _save(fig, out_dir / "itl_ecdf.png")
    return FigureRef(path, "Inter-token latency ECDF", "Per-token ITLs pooled over repeats; dashed lines are the medians.")


def plot_gsm8k(document: Document, analysis: Comparison, out_dir: Path) -> FigureRef | str | None:
    if not analysis.ran("gsm8k"):
        return None
    metrics = [m for m in ("gsm8k_accuracy", "gsm8k_invalid") if any(r.metric == m for r in analysis.estimates)]
    cases = _all_cases(analysis, metrics)
    colors = arm_colors(analysis.arm_order)
    fig, axes = _grid(len(metrics))
    for ax, metric in zip(axes, metrics, strict=False):
        _estimate_points(ax, analysis, metric, cases, colors)
        _case_axis(ax, cases)
        _label_panel(ax, analysis, metric)
    axes[0].set_ylim(-3, 103)  # 0 % and 100 % drawn whole
    fig.suptitle("GSM8K per setting and arm (95% Clopper–Pearson CI)")
    fig.legend(handles=_legend_handles(analysis.arm_order, colors, analysis.baseline), loc="outside lower center",
               ncols=len(analysis.arm_order))
    path = _save(fig, out_dir / "gsm8k.png")
    return FigureRef(path, "GSM8K accuracy and invalid rate", "Pooled over repeats; SGLang's answer definition (last integer).")


def plot_spread(document: Document, analysis: Comparison, out_dir: Path) -> FigureRef | str | None:
    spread = analysis.repeat_spread or {}
    metrics = [m for m in analysis.spread_rows or spread if spread.get(m)]
    if not metrics:
        return "Spread figure: no per-repeat values in these results."
    if (document.repeats or 1) < 2 and _most_repeats(spread) < 2:
        return None  # one dot per arm shows no spread
    colors = arm_colors(analysis.arm_order)
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
        if metric in RATE_PANELS:
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


# In the page's order: the corruption first, then what it does to answers, acceptance and latency.
PLOTTERS: tuple[Callable[[Document, Comparison, Path], FigureRef | str | None], ...] = (
    plot_rates, plot_gsm8k, plot_accept_length, plot_itl_ecdf, plot_spread)


def render_plots(document: Document, out_dir: Path) -> tuple[list[FigureRef], list[str]]:
    """Write every figure the data allows into out_dir; notes say which were skipped and why."""
    analysis = document.analysis
    if analysis is None:
        return [], ["Figures: not drawn, the results file holds no A/B analysis."]
    figures, notes = [], []
    with matplotlib.rc_context(STYLE):
        for plotter in PLOTTERS:
            outcome = plotter(document, analysis, out_dir)
            if outcome is not None:
                (figures if isinstance(outcome, FigureRef) else notes).append(outcome)
    return figures, notes
