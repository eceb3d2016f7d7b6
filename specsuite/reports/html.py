"""HTML renderer: one self-contained file, figures embedded as base64 PNG data URIs.

No scripts, fonts, stylesheets or images are fetched from anywhere, so the file reads the same
on an offline CI runner as on a laptop.  Blocks are specsuite/reports/blocks.py's: a banner paragraph (the server
under test) is a coloured box, the verdict list is in large type and a note is a muted line.  Any
verdict string is drawn as a chip (`class="verdict v-<slug>"`); the known ones have their own colours, "suspect" a warning style of its own.
"""

from __future__ import annotations

import base64
import html
import re
import struct
from collections.abc import Collection

from specsuite.reports.blocks import Block, Bullets, FigureRef, Heading, Paragraph, ParagraphStyle, Report, Table, VerdictLine, VerdictList

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.2em auto; max-width: 1400px;
       padding: 0 1em; color: #1a1a1a; line-height: 1.45; }
h1 { margin: 0.5em 0 0.1em; font-size: 1.7em; } h2 { margin-top: 1.4em; border-bottom: 1px solid #ddd; }
.banner { padding: 0.7em 1em; border-radius: 6px; font-size: 1.05em; }
.banner.emulation { background: #fff4ce; border: 2px solid #e0a800; }
.banner.real { background: #eef4fb; border: 1px solid #9bbbe0; }
.provenance { color: #555; font-size: 0.9em; margin-top: 0; }
ul.verdicts { list-style: none; padding: 0; margin: 0.4em 0 0.8em; font-size: 1.12em; }
ul.verdicts li { padding: 0.35em 0.6em; margin: 0.2em 0; border-left: 5px solid #ccc; background: #fafafa; }
ul.verdicts li.alarm { border-left-color: #b00020; } ul.verdicts li.suspect { border-left-color: #8a3ffc; }
ul.verdicts li.calm { border-left-color: #1b5e20; }
.note { color: #555; font-style: italic; }
table { border-collapse: collapse; margin: 0.6em 0 1.4em; font-size: 0.9em; }
th, td { border: 1px solid #c8c8c8; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
td.nowrap { white-space: nowrap; }
tr:nth-child(even) td { background: #fafafa; }
code, pre { font-family: ui-monospace, Menlo, Consolas, monospace; background: #f4f4f4; }
pre { padding: 0.6em; overflow-x: auto; }
.figures { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(100%, 560px), 1fr)); gap: 1em; align-items: start; }
.table-wrap { overflow-x: auto; max-width: 100%; margin: 0.6em 0 1.4em; } .table-wrap table { margin: 0; }
@media (max-width: 600px) { body { padding: 0 0.5em; margin: 0.6em auto; } ul.verdicts { font-size: 1em; } h1 { font-size: 1.35em; } }
figure { margin: 0; } figure.wide { grid-column: 1 / -1; }
figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { font-size: 0.9em; color: #444; }
.verdict { padding: 0 0.35em; border-radius: 4px; border: 1px solid #999; color: #333; font-weight: 600; white-space: nowrap; }
.v-worse { color: #fff; background: #b00020; border-color: #b00020; }
.v-better { color: #fff; background: #1b5e20; border-color: #1b5e20; }
.v-equivalent { color: #0d47a1; border-color: #0d47a1; }
.v-inconclusive { color: #555; border-color: #aaa; font-weight: 500; }
.v-none-in-either-arm { color: #1b5e20; border-color: #9c9; font-weight: 500; }
.v-suspect { color: #fff; background: #8a3ffc; border-color: #5a1fbf; }
.v-suspect::before { content: "\\26A0\\FE0E  "; }
"""
KNOWN_VERDICTS = ("worse", "better", "equivalent", "inconclusive", "suspect")
ALARMING = ("worse",)
WIDE_PX = 1400  # a figure at least this wide gets the whole row
NOWRAP_COLUMNS = ("metric", "case")  # short names a reader scans down: never broken over lines


def verdict_class(verdict: str) -> str:
    """`verdict v-<slug>` for any verdict string, so an unknown one is still drawn as a chip."""
    return "verdict v-" + (re.sub(r"[^a-z0-9]+", "-", verdict.lower()).strip("-") or "unnamed")


def _inline(text: str, verdicts: Collection[str]) -> str:
    """Escape, then the two Markdown marks the document uses: **bold** (a verdict becomes a chip) and `code`."""
    escaped = html.escape(text)
    escaped = re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)

    def bold(match: re.Match[str]) -> str:
        word = match.group(1)
        if html.unescape(word) in verdicts:
            return f'<strong class="{verdict_class(html.unescape(word))}">{word}</strong>'
        return f"<strong>{word}</strong>"

    return re.sub(r"\*\*([^*]+)\*\*", bold, escaped)


def _table(table: Table, verdicts: Collection[str]) -> str:
    head = "".join(f"<th>{_inline(c, verdicts)}</th>" for c in table.header)
    nowrap = {i for i, name in enumerate(table.header) if name in NOWRAP_COLUMNS}
    body = "".join("<tr>" + "".join(('<td class="nowrap">' if i in nowrap else "<td>") + f"{_inline(c, verdicts)}</td>"
                                    for i, c in enumerate(row)) + "</tr>" for row in table.rows)
    # In a scrolling box: a wide table scrolls on a phone instead of being cut off at the screen's edge.
    return f'<div class="table-wrap"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _png_width(data: bytes) -> int:
    """The width in a PNG's IHDR (0 when the bytes are not a PNG)."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or len(data) < 24:
        return 0
    return int(struct.unpack(">I", data[16:20])[0])


def _figure(figure: FigureRef, verdicts: Collection[str]) -> str:
    raw = figure.path.read_bytes()
    data = base64.b64encode(raw).decode("ascii")
    wide = ' class="wide"' if _png_width(raw) >= WIDE_PX else ""
    return (f'<figure{wide}><img alt="{html.escape(figure.title)}" src="data:image/png;base64,{data}">'
            f"<figcaption><strong>{html.escape(figure.title)}.</strong> {_inline(figure.caption, verdicts)}</figcaption></figure>")


def _verdict_lines(lines: list[VerdictLine], verdicts: Collection[str]) -> str:
    items = []
    for line in lines:
        named = set(line.verdicts)
        # The left border: alarm for worse, its own colour for suspect, green only when all is equivalent.
        tone = ("suspect" if "suspect" in named else "alarm" if named & set(ALARMING)
                else "calm" if named and named <= {"equivalent"} else "")
        items.append(f'<li class="{tone}">{_inline(line.text, verdicts)}</li>')
    return '<ul class="verdicts">' + "".join(items) + "</ul>"


def _paragraph(text: str, css: str, verdicts: Collection[str]) -> str:
    attribute = f' class="{css}"' if css else ""
    return f"<p{attribute}>{_inline(text, verdicts)}</p>"


def _banner(text: str, verdicts: Collection[str]) -> str:
    tone = "emulation" if "emulation" in text.lower() else "real"
    return _paragraph(text, f"banner {tone}", verdicts)


def _block(block: Block, verdicts: Collection[str]) -> str:
    """One block other than a figure (figures are gathered into a grid)."""
    if isinstance(block, Heading):
        return f"<h{block.level}>{_inline(block.text, verdicts)}</h{block.level}>"
    if isinstance(block, Paragraph):
        if block.style is ParagraphStyle.BANNER:
            return _banner(block.text, verdicts)
        return _paragraph(block.text, block.style.value, verdicts)
    if isinstance(block, VerdictList):
        return _verdict_lines(block.lines, verdicts)
    if isinstance(block, Bullets):
        return "<ul>" + "".join(f"<li>{_inline(item, verdicts)}</li>" for item in block.items) + "</ul>"
    if isinstance(block, Table):
        return _table(block, verdicts)
    return f"<pre>{html.escape(block.text)}</pre>"  # Preformatted


def render_html(report: Report, verdicts: Collection[str] = KNOWN_VERDICTS) -> str:
    """The report as one HTML page with every figure inlined; `verdicts` are the strings drawn as chips."""
    known = set(verdicts) | set(KNOWN_VERDICTS)
    parts: list[str] = []
    figures: list[str] = []

    def flush_figures() -> None:
        if figures:
            parts.append('<div class="figures">' + "".join(figures) + "</div>")
            figures.clear()

    for block in report.blocks:
        if isinstance(block, FigureRef):
            figures.append(_figure(block, known))
            continue
        flush_figures()
        parts.append(_block(block, known))
    flush_figures()
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{html.escape(report.title)}</title><style>{_STYLE}</style></head><body>\n"
            + "\n".join(parts) + "\n</body></html>\n")
