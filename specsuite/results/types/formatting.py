"""The number formats the report and the text the harness writes into the analysis share, so both read alike."""

from __future__ import annotations

NONE_IN_EITHER = "none in either arm"  # how an "inconclusive" rate reads when neither arm had a single event


# Shared by the report (specsuite/reports/blocks.py re-exports them) and the text the harness writes into the analysis
# for it (a family's verdict-line figures and report section), so both read alike.
def fmt(value: float | None, digits: int = 3) -> str:
    """A number to `digits` significant figures; '∞' for a missing bound."""
    if value is None:
        return "∞"
    if value == 0:
        return "0"
    if abs(value) >= 10 ** digits:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def pct(value: float | None, digits: int = 3) -> str:
    return "∞" if value is None else f"{fmt(value * 100, digits)}%"


def fmt_p(p: float | None) -> str:
    if p is None:
        return "–"
    return "<1e-300" if p == 0 else f"{p:.2g}"


def case_title(temperature: float, top_p: float) -> str:
    """A sampling case as the report names it (its headings, a figure's panels)."""
    return f"T = {temperature:g}, top_p = {top_p:g}"
