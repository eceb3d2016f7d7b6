"""Markdown renderer: the report's blocks (specsuite/reports/blocks.py) as GitHub-flavoured Markdown, figures linked by file name."""

from __future__ import annotations

from specsuite.reports.blocks import Block, Bullets, FigureRef, Heading, Paragraph, ParagraphStyle, Report, Table, VerdictList


def _escape(cell: str) -> str:
    return cell.replace("|", "\\|").replace("\n", " ")


def table_markdown(table: Table) -> str:
    lines = ["| " + " | ".join(_escape(c) for c in table.header) + " |", "|" + "---|" * len(table.header)]
    lines += ["| " + " | ".join(_escape(c) for c in row) + " |" for row in table.rows]
    return "\n".join(lines)


def _figure(figure: FigureRef) -> str:
    return f"**{figure.title}**\n\n![{figure.title}]({figure.path.name})\n\n{figure.caption}"


def bullet_list(items: list[str]) -> str:
    return "\n".join(f"- {item}" for item in items)


def block_markdown(block: Block) -> str:
    """One block as Markdown."""
    if isinstance(block, Heading):
        return "#" * block.level + " " + block.text
    if isinstance(block, Paragraph):
        # The banner is the first line as is: readers (and tests) look for it there.
        return f"_{block.text}_" if block.style is ParagraphStyle.NOTE else block.text
    if isinstance(block, VerdictList):
        return bullet_list([line.text for line in block.lines])
    if isinstance(block, Bullets):
        return bullet_list(block.items)
    if isinstance(block, Table):
        return table_markdown(block)
    if isinstance(block, FigureRef):
        return _figure(block)
    return block.text.rstrip()  # Preformatted: Markdown already


def render_markdown(report: Report) -> str:
    """The report as Markdown text."""
    return "\n\n".join(block_markdown(block) for block in report.blocks) + "\n"
