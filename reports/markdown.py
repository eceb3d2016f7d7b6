"""Markdown renderer: the report document as GitHub-flavoured Markdown, figures linked by file name.

Block kinds beyond document.py's (see reports/overview.py):
"verdicts" a list of the verdict lines, "banner" and "provenance" plain lines, "note" in italics.
"""

from __future__ import annotations

from reports.document import Document, FigureRef, Table


def _escape(cell: str) -> str:
    return cell.replace("|", "\\|").replace("\n", " ")


def table_markdown(table: Table) -> str:
    lines = ["| " + " | ".join(_escape(c) for c in table.header) + " |", "|" + "---|" * len(table.header)]
    lines += ["| " + " | ".join(_escape(c) for c in row) + " |" for row in table.rows]
    return "\n".join(lines)


def _figure(figure: FigureRef) -> str:
    return f"**{figure.title}**\n\n![{figure.title}]({figure.path.name})\n\n{figure.caption}"


def render_markdown(document: Document) -> str:
    """The document as Markdown text."""
    parts = []
    for block in document.blocks:
        kind = block[0]
        if kind == "h":
            parts.append("#" * block[1] + " " + block[2])
        elif kind in ("p", "provenance"):
            parts.append(block[1])
        elif kind == "note":
            parts.append(f"_{block[1]}_")
        elif kind == "banner":
            parts.append(block[1])  # the first line as is: readers (and tests) look for it there
        elif kind == "verdicts":
            parts.append("\n".join(f"- {line.text}" for line in block[1]))
        elif kind == "list":
            parts.append("\n".join(f"- {item}" for item in block[1]))
        elif kind == "table":
            parts.append(table_markdown(block[1]))
        elif kind == "figure":
            parts.append(_figure(block[1]))
        elif kind == "raw":
            parts.append(block[1].rstrip())
    return "\n\n".join(parts) + "\n"
