"""The report's building blocks (headings, paragraphs, tables, figures) and its number formats.

reports/document.py lays the report out with them and reports/kernel_section.py adds its section
with them; both import this module, so neither imports the other's importer (no import cycle).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]


@dataclass
class FigureRef:
    """A PNG written next to the report, with what it shows."""

    path: Path
    title: str
    caption: str


@dataclass
class Document:
    """Ordered blocks: ("h", level, text), ("p", text), ("table", Table), ("figure", FigureRef), ("list", [str])."""

    title: str
    blocks: list[tuple[Any, ...]] = field(default_factory=list)

    def heading(self, level: int, text: str) -> None:
        self.blocks.append(("h", level, text))

    def paragraph(self, text: str) -> None:
        self.blocks.append(("p", text))

    def table(self, table: Table) -> None:
        self.blocks.append(("table", table))

    def bullets(self, items: list[str]) -> None:
        if items:
            self.blocks.append(("list", items))


# ---------------------------------------------------------------- number formatting


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
