"""The report's typed blocks (headings, paragraphs, lists, tables, figures), what each one is, and the number formats.

One builder (specsuite/reports/overview.py `build_report`) lays a `Report` out of these blocks; the Markdown and
HTML renderers draw every block and summary.md draws the blocks it selects by their `Role`
(specsuite/reports/summary.py).  The renderers tell blocks apart by their class, never by their text.  The
number formats are the results model's (specsuite.results.types), re-exported here for the renderers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Union

from specsuite.results.types import fmt, fmt_p, pct

__all__ = ["Block", "Bullets", "FigureRef", "Heading", "Paragraph", "ParagraphStyle", "Preformatted", "Report", "Role", "Table",
           "VerdictLine", "VerdictList", "fmt", "fmt_p", "pct"]


class Role(Enum):
    """What a block says, for a renderer that shows only some of them (summary.md)."""

    BODY = "body"  # anything no selection asks for by name
    SERVER_UNDER_TEST = "server under test"
    VERDICT_LINES = "verdict lines"
    FAILURES = "what failed"
    SIDE_BY_SIDE = "side-by-side caveat"
    FAMILY_CAVEAT = "a family's caveat (the synthetic GSM8K set)"
    NOT_RUN = "not run"
    PER_CASE_COUNTS = "per-case counts"


class ParagraphStyle(Enum):
    """How a paragraph is drawn: plain, the server-under-test banner, the provenance line, or a muted note."""

    PLAIN = ""
    BANNER = "banner"
    PROVENANCE = "provenance"
    NOTE = "note"


@dataclass
class Heading:
    level: int
    text: str


@dataclass
class Paragraph:
    text: str
    style: ParagraphStyle = ParagraphStyle.PLAIN
    role: Role = Role.BODY


@dataclass
class Bullets:
    items: list[str]


@dataclass
class VerdictLine:
    """One arm's summary for one family: the text (Markdown marks) and the verdicts it names."""

    arm: str
    family: str
    text: str
    verdicts: list[str] = field(default_factory=list)


@dataclass
class VerdictList:
    """The verdict lines, drawn large: one per arm and workload family."""

    lines: list[VerdictLine]
    role: Role = Role.VERDICT_LINES


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
class Preformatted:
    """Text drawn as it is: Markdown as Markdown, HTML as a <pre> block."""

    text: str
    role: Role = Role.BODY


Block = Union[Heading, Paragraph, Bullets, VerdictList, Table, FigureRef, Preformatted]


@dataclass
class Report:
    """The rendered report: a title and its blocks in page order (not the results file: specsuite.results.types.Document)."""

    title: str
    blocks: list[Block] = field(default_factory=list)

    def heading(self, level: int, text: str) -> None:
        self.blocks.append(Heading(level, text))

    def paragraph(self, text: str, style: ParagraphStyle = ParagraphStyle.PLAIN, role: Role = Role.BODY) -> None:
        self.blocks.append(Paragraph(text, style, role))

    def table(self, table: Table) -> None:
        self.blocks.append(table)

    def bullets(self, items: list[str]) -> None:
        if items:
            self.blocks.append(Bullets(items))

    def with_role(self, role: Role) -> list[Block]:
        """The blocks that say `role`, in page order."""
        return [block for block in self.blocks if isinstance(block, (Paragraph, VerdictList, Preformatted)) and block.role is role]
