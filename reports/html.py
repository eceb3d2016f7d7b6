"""HTML renderer: one self-contained file, figures embedded as base64 PNG data URIs.

No scripts, fonts, stylesheets or images are fetched from anywhere, so the file reads the same
on an offline CI runner as on a laptop.
"""

from __future__ import annotations

import base64
import html
import re

from reports.document import Document, FigureRef, Table

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1400px;
       padding: 0 1em; color: #1a1a1a; line-height: 1.45; }
table { border-collapse: collapse; margin: 0.6em 0 1.4em; font-size: 0.9em; }
th, td { border: 1px solid #c8c8c8; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
tr:nth-child(even) td { background: #fafafa; }
code, pre { font-family: ui-monospace, Menlo, Consolas, monospace; background: #f4f4f4; }
pre { padding: 0.6em; overflow-x: auto; }
figure { margin: 1.5em 0; }
figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { font-size: 0.9em; color: #444; }
.worse { color: #b00020; font-weight: 600; } .better { color: #1b5e20; font-weight: 600; }
.equivalent { color: #0d47a1; font-weight: 600; } .inconclusive { color: #555; font-weight: 600; }
"""
_VERDICT_WORDS = ("worse", "better", "equivalent", "inconclusive")


def _inline(text: str) -> str:
    """Escape, then the two Markdown marks the document uses: **bold** and `code`."""
    escaped = html.escape(text)
    escaped = re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)

    def bold(match: re.Match[str]) -> str:
        word = match.group(1)
        css = f' class="{word}"' if word in _VERDICT_WORDS else ""
        return f"<strong{css}>{word}</strong>"

    return re.sub(r"\*\*([^*]+)\*\*", bold, escaped)


def _table(table: Table) -> str:
    head = "".join(f"<th>{_inline(c)}</th>" for c in table.header)
    body = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>" for row in table.rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _figure(figure: FigureRef) -> str:
    data = base64.b64encode(figure.path.read_bytes()).decode("ascii")
    return (f'<figure><img alt="{html.escape(figure.title)}" src="data:image/png;base64,{data}">'
            f"<figcaption><strong>{html.escape(figure.title)}.</strong> {_inline(figure.caption)}</figcaption></figure>")


def render_html(document: Document) -> str:
    """The document as one HTML page with every figure inlined."""
    parts = []
    for block in document.blocks:
        kind = block[0]
        if kind == "h":
            parts.append(f"<h{block[1]}>{_inline(block[2])}</h{block[1]}>")
        elif kind == "p":
            parts.append(f"<p>{_inline(block[1])}</p>")
        elif kind == "list":
            parts.append("<ul>" + "".join(f"<li>{_inline(item)}</li>" for item in block[1]) + "</ul>")
        elif kind == "table":
            parts.append(_table(block[1]))
        elif kind == "figure":
            parts.append(_figure(block[1]))
        elif kind == "raw":
            parts.append(f"<pre>{html.escape(block[1])}</pre>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(document.title)}</title><style>{_STYLE}</style></head><body>\n"
            + "\n".join(parts) + "\n</body></html>\n")
