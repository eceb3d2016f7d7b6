"""The report's building blocks (headings, paragraphs, tables, figures) and its number formats.

reports/document.py lays the report out with them and reports/kernel_section.py adds its section
with them; both import this module, so neither imports the other's importer (no import cycle).  The
number formats are the results model's (harness.results.types), which the harness's text in the
analysis uses too; they are re-exported here for the renderers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.results.types import fmt, fmt_p, pct

__all__ = ["Document", "FigureRef", "Table", "fmt", "fmt_p", "pct"]


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
