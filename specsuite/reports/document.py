"""The report's tables, as typed blocks (specsuite/reports/blocks.py), built from the typed results (specsuite.results.types).

`add_tables(report, document)` appends what the page shows after its figures: the kernel section,
the before/after tables per sampling case (values with 95 % intervals and the verdict against the
baseline), each workload family's own section (the lossless tests, the integrity checks: written into
the analysis by the family, specsuite/families/), the verdict table (effect, interval, p, Holm p, MDE),
the spread between repeats and the setup.  The A/B analysis is the one under `ANALYSIS_KEY` (written by
specsuite.analysis.verdicts.compare_arms).  Nothing here computes statistics; it only formats them.  Which
rows there are, their labels and display formats are the metric registry's, read from the analysis
(`metrics`, `report_rows`, `spread_rows`), since the reports import nothing from the harness beyond
its results.  Verdicts are shown as given, "suspect" (a higher accept length in an arm that emits
invalid ids) with its note.
"""

from __future__ import annotations

from typing import Any

from specsuite.reports.blocks import Block, Heading, Preformatted, Report, Role, Table, fmt, fmt_p, pct
from specsuite.reports.kernel_section import add_kernel_section
from specsuite.reports.summary_table import summary_markdown
from specsuite.results.types import (  # noqa: F401  (ANALYSIS_KEY, case_title: re-exported for the renderers)
    ANALYSIS_KEY,
    NONE_IN_EITHER,
    Arm,
    ArmIdentity,
    Comparison,
    ComparisonRow,
    Effect,
    EstimateRow,
    Mde,
    ReportSection,
    SpeculativeSettings,
    SpreadEntry,
    case_title,
)
from specsuite.results.types import Document as ResultsDocument

NOT_RUN = "not run"

VERDICTS = ("worse", "suspect", "better", "equivalent", "inconclusive", NONE_IN_EITHER)  # the order the verdict counts are given in


def row_case_title(row: ComparisonRow) -> str:
    """A comparison row's case: its sampling setting, or its case id where no setting names it (a session's checks)."""
    return str(row.case_id) if row.temperature is None or row.top_p is None else case_title(row.temperature, row.top_p)


def interval(ci: list[float | None] | None, kind: str) -> str:
    if not ci:
        return ""
    low, high = (_display(ci[0], kind), _display(ci[1], kind))
    return f" [{low}, {high}]"


def _display(value: float | None, kind: str) -> str:
    if kind in ("token_rate", "proportion"):
        return pct(value)
    return fmt(value)


def estimate_cell(row: EstimateRow, kind: str) -> str:
    """One arm's pooled value with its 95 % interval, in the metric's natural unit."""
    value, ci = row.value, row.ci
    if kind == "token_rate":
        return f"{row.k} / {fmt(row.n, 6)} = {pct(value)}{interval(ci, kind)}"
    if kind == "proportion":
        return f"{pct(value)}{interval(ci, kind)} ({row.k}/{row.n})"
    if kind == "per_batch":
        return f"{fmt(value)} ({row.k:,} in {fmt(row.n, 6)} batches)"
    if kind == "per_1200":
        return f"{fmt(value)}{interval(ci, kind)} ({row.k} in {fmt(row.n, 6)} tokens)"
    unit = {"ms": " ms", "tok_s": " tok/s"}.get(kind, "")
    return f"{fmt(value, 4)}{unit}{interval(ci, kind)}"


def effect_text(comparison: ComparisonRow) -> str:
    """The effect with its interval: rate ratio, relative change or difference in points."""
    effect = comparison.effect or Effect()
    value, ci, scale = effect.value, effect.ci, effect.scale
    if scale == "ratio":
        if value is None:
            shown = "∞" if comparison.events is not None and comparison.events.candidate else "undefined (0 vs 0 events)"
        else:
            shown = fmt(value)
        bounds = f" [{fmt(ci[0])}, {fmt(ci[1])}]" if ci else ""
        return f"ratio {shown}{bounds}"
    if scale == "relative":
        bounds = f" [{_signed_pct(ci[0])}, {_signed_pct(ci[1])}]" if ci else ""
        return f"{_signed_pct(value)}{bounds}"
    if scale == "difference":
        bounds = f" [{_points(ci[0])}, {_points(ci[1])}]" if ci else ""
        return f"{_points(value)}{bounds} pt"
    return "–"


def _signed_pct(value: float | None) -> str:
    if value is None:
        return "∞"
    return f"{value * 100:+.3g}%" if abs(value) >= 1e-12 else "0%"


def _points(value: float | None) -> str:
    return "∞" if value is None else f"{value * 100:+.3g}"


def mde_text(comparison: ComparisonRow, kind: str) -> str:
    mde = comparison.mde or Mde()
    value, scale = mde.value, mde.scale
    if value is None:
        return "–"
    text = {"ratio": f"ratio {fmt(value)}", "relative": f"±{pct(value)}", "difference": f"{fmt(value * 100)} pt",
            "absolute": f"{pct(value) if kind == 'token_rate' else fmt(value)} from 0"}.get(scale, fmt(value))
    if mde.repeats_needed:
        text += f" (threshold needs {mde.repeats_needed} repeats)"
    return text


def metric_fact(analysis: Comparison, metric: str, key: str) -> str:
    """One of the registry's facts about a metric, as the analysis carries them (`metrics.<name>`):
    its label, unit, report format, verdict-line name (`short`), figure title and axis label. A
    metric the analysis does not describe reads as its name; a fact an older analysis lacks, as
    its label or unit (`MetricFacts.fact`)."""
    return analysis.facts(metric).fact(key, metric)


def kind_of(analysis: Comparison, metric: str) -> str:
    """The display format the registry gives a metric ("plain" for one it does not know)."""
    return metric_fact(analysis, metric, "report_format")


# ---------------------------------------------------------------- the tables


def add_tables(report: Report, document: ResultsDocument) -> None:
    """The report's tables after its figures: the kernel section, then the before/after tables, each family's section,
    the verdict table and the spread between repeats (none of it with one repeat per arm), then the setup; without
    an analysis, the raw totals per arm and case.  Rows that hold nothing but "not run" are left out, and so is a
    table left without rows and a heading left without content."""
    analysis = document.analysis
    body = Report(report.title)
    add_kernel_section(body, document)
    if analysis is None:
        if body.blocks:  # under the kernel section's heading, the raw totals need their own introduction
            body.paragraph("This results file holds no A/B analysis; `specsuite report RESULTS.json --out DIR` computes it. "
                           "Raw totals per arm and case:")
        body.blocks.append(per_case_counts(document))
    else:
        _before_after(body, analysis)
        for family in analysis.families.values():
            if family.section is not None:
                _family_section(body, family.section)
        _verdicts(body, analysis)
        if (document.repeats or 1) >= 2:
            _spread(body, analysis)
    setup = _setup_lines(document, analysis)
    if setup:
        body.heading(2, "Setup")
        body.bullets(setup)
    report.blocks.extend(_without_empty_headings([kept for block in body.blocks for kept in _without_empty_rows(block)]))


def per_case_counts(document: ResultsDocument) -> Preformatted:
    """The raw totals per arm and case (specsuite/reports/summary_table.py), as Markdown."""
    return Preformatted(summary_markdown(document), Role.PER_CASE_COUNTS)


def _without_empty_rows(block: Block) -> list[Block]:
    """A table without its all-"not run" rows; nothing for a table left without rows; any other block as it is."""
    if not isinstance(block, Table):
        return [block]
    rows = [row for row in block.rows if not _empty_row(row)]
    return [Table(block.header, rows)] if rows else []


def _empty_row(row: list[str]) -> bool:
    """A row whose every value says it did not run (the first cell is the row's label)."""
    values = [cell.strip() for cell in row[1:]]
    blank = [v == "–" or v.startswith(NOT_RUN) or v.startswith("n/a") for v in values]
    return bool(values) and all(blank) and any(v != "–" for v in values)


def _without_empty_headings(blocks: list[Block]) -> list[Block]:
    """Drop a heading with no content before the next heading of its level or above."""
    return [block for index, block in enumerate(blocks) if not isinstance(block, Heading) or _has_content(blocks, index)]


def _has_content(blocks: list[Block], heading: int) -> bool:
    level = blocks[heading].level  # type: ignore[union-attr]  (a Heading: the caller's index)
    for block in blocks[heading + 1:]:
        if not isinstance(block, Heading):
            return True
        if block.level <= level:
            return False
    return False


def _setup_lines(document: ResultsDocument, analysis: Comparison | None) -> list[str]:
    """The arms, their servers and seeds, how verdicts are decided and the analysis's notes (the status, provenance,
    warnings and what did not run are on the page above)."""
    lines = []
    baseline = analysis.baseline if analysis is not None else document.baseline_arm
    for name in document.ordered_arms():
        arm = document.arms.get(name)
        role = "baseline" if name == baseline else "candidate"
        if arm is None:
            lines.append(f"arm **{name}** ({role}): no results")
            continue
        seeds = ", ".join(str(r.seed) for r in arm.repeats)
        lines.append(f"arm **{name}** ({role}): {_identity_text(arm)}; {len(arm.repeats)} repeat(s), seeds {seeds or '–'}")
    if analysis is not None:
        lines.append(f"verdicts: Holm-adjusted p < {analysis.family_alpha:g} across {len(analysis.comparisons)} "
                     f"comparisons AND an effect past the practical threshold; intervals are {analysis.confidence:.0%}; "
                     f"MDE at {analysis.power:.0%} power")
        lines += [f"note: {note}" for note in analysis.notes or []]
    return lines


def header_value(document: ResultsDocument, name: str, missing: str = "?") -> Any:
    """A header field as the header shows it: `missing` when the file does not have it (None when it says None)."""
    value = getattr(document, name)
    written = name in document.key_order if document.key_order else value is not None
    return value if written else missing


def _identity_text(arm: Arm) -> str:
    identity = ArmIdentity.of(arm)
    spec = identity.speculative or SpeculativeSettings()
    emulated = identity.is_reference()
    version = identity.version if identity.has("version") else "?"
    parts = [f"reference emulation of SGLang {version}" if emulated else f"server {version}"]
    if spec.speculative_algorithm:
        parts.append(f"{spec.speculative_algorithm} steps {spec.speculative_num_steps} topk "
                     f"{spec.speculative_eagle_topk} draft tokens {spec.speculative_num_draft_tokens}")
    if identity.cuda_graph:
        # The reference server has no GPU: its "CUDA graph" is a simulated graph memory pool (the recycled-draft_probs bug's mechanism).
        parts.append(f"simulated CUDA-graph pool {identity.cuda_graph} (CPU emulation)" if emulated else f"CUDA graph {identity.cuda_graph}")
    if identity.vocab_size:
        parts.append(f"vocab {identity.vocab_size} (tokenizer {identity.tokenizer_length})")
    return ", ".join(parts)


def _cases(analysis: Comparison) -> list[tuple[float, float]]:
    """The sampling cases of the before/after tables: those of the metrics they show."""
    rows = set(analysis.report_rows)
    keys = {(row.temperature, row.top_p) for row in analysis.estimates if row.metric in rows}
    return sorted(keys)


def _before_after(doc: Report, analysis: Comparison) -> None:
    arms, baseline = analysis.arm_order, analysis.baseline
    candidates = analysis.candidates or []
    estimates = {(r.arm, r.metric, r.temperature, r.top_p): r for r in analysis.estimates}
    comparisons = {(c.candidate, c.metric, c.temperature, c.top_p): c for c in analysis.comparisons}
    present = {r.metric for r in analysis.estimates}
    metrics = analysis.metrics
    counters = [m for m in analysis.report_rows if metrics[m].server_counter]
    doc.heading(2, "Before / after, per sampling case")
    doc.paragraph("Each cell: the arm's pooled value over its repeats with a 95% interval (Clopper–Pearson for "
                  "proportions, t for the mean accept length, order statistics for the median ITL). The verdict column "
                  "compares the candidate with the baseline; see the verdict table for effects and p-values.")
    header = ["metric"] + [f"{arm} ({'baseline' if arm == baseline else 'candidate'})" for arm in arms]
    header += [f"verdict {c} vs {baseline}" for c in candidates]
    for temperature, top_p in _cases(analysis):
        rows = []
        for metric in analysis.report_rows:
            facts = metrics[metric]
            label, kind = str(facts.report_label), str(facts.report_format)
            family = analysis.families.get(str(facts.source))
            if family is not None and family.caveat_tag:  # the synthetic GSM8K set's rows say so
                label += f" ({family.caveat_tag})"
            if metric in counters and metric not in present:
                continue  # the server does not export this counter
            workload = facts.source if facts.source in analysis.workloads else None
            if workload and not analysis.ran(workload):
                rows.append([label] + [NOT_RUN] * (len(arms) + len(candidates)))
                continue
            cells = [label]
            for arm in arms:
                row = estimates.get((arm, metric, temperature, top_p))
                cells.append(estimate_cell(row, kind) if row else (f"{NOT_RUN} at this setting" if workload else "n/a (no data)"))
            for candidate in candidates:
                comparison = comparisons.get((candidate, metric, temperature, top_p))
                cells.append(f"**{comparison.shown_verdict()}** (p_adj {fmt_p(comparison.p_adjusted)})" if comparison else "–")
            rows.append(cells)
        doc.heading(3, case_title(temperature, top_p))
        doc.table(Table(header, rows))
    missing = [m for m in counters if m not in present]
    if missing:
        doc.paragraph(f"Not shown: {', '.join(missing)} (no values in these results).")


def _family_section(doc: Report, section: ReportSection) -> None:
    """A workload family's own section, as the family wrote it into the analysis."""
    doc.heading(2, section.title)
    for paragraph in section.paragraphs:
        doc.paragraph(paragraph)
    for table in section.tables:
        if table.title:
            doc.heading(3, table.title)
        doc.table(Table(list(table.header), [list(row) for row in table.rows]))


def _verdicts(doc: Report, analysis: Comparison) -> None:
    doc.heading(2, "Verdicts")
    rows = analysis.comparisons
    if not rows:
        doc.paragraph("No comparisons: the results hold fewer than two arms with data.")
        return
    counts = {v: sum(r.shown_verdict() == v for r in rows) for v in VERDICTS}
    counts = {v: n for v, n in counts.items() if n or v not in ("suspect", NONE_IN_EITHER)}  # "0 suspect" says nothing
    doc.paragraph(", ".join(f"{n} {v}" for v, n in counts.items()) + ". Rates compare events per unit exposure "
                  "(ratio candidate / baseline); from a zero-event baseline any significant increase is 'worse'.")
    doc.bullets(_suspect_summary(rows))
    table = Table(["metric", "case", "candidate", "baseline", "candidate value", "baseline value", "effect [95% CI]",
                   "p", "p (Holm)", "MDE", "test", "verdict"], [])
    for row in rows:
        kind = kind_of(analysis, row.metric)
        table.rows.append([row.metric, row_case_title(row), row.candidate, row.baseline,
                           _value(row.candidate_value, kind) + _statistic(row), _value(row.baseline_value, kind) + _statistic(row),
                           effect_text(row), fmt_p(row.p_value), fmt_p(row.p_adjusted), mde_text(row, kind),
                           (row.test or "–") + _note_cell(row),
                           f"**{row.shown_verdict()}**"])
    doc.table(table)


def _suspect_summary(rows: list[ComparisonRow]) -> list[str]:
    """One line per suspect metric and pair of arms, naming its cases and what the arm is worse on (the why is said once,
    under the verdict lines)."""
    groups: dict[tuple[str | None, str, str], list[ComparisonRow]] = {}
    for row in rows:
        if row.verdict == "suspect":
            groups.setdefault((row.label, row.candidate, row.baseline), []).append(row)
    lines = []
    for (label, candidate, baseline), hits in groups.items():
        signs = sorted({sign for row in hits for sign in row.suspect_because or ()})
        cases = "; ".join(row_case_title(row) for row in hits)
        lines.append(f"**suspect**: {label}, {candidate} vs {baseline}, in {len(hits)} case(s) ({cases}): higher while worse on "
                     f"{', '.join(signs) or 'a corruption sign'}")
    return lines


def _note_cell(row: ComparisonRow) -> str:
    """The verdict table's note: a suspect row's explanation is given once above the table, not on every row."""
    note = row.note
    if not note:
        return ""
    if row.verdict == "suspect":
        rest = note.split("; ", 1)[1] if "; " in note and note.startswith("higher accept length") else ""
        return "; suspect: see above" + (f"; {rest}" if rest else "")
    return f"; {note}"


def _statistic(row: ComparisonRow) -> str:
    """Which statistic a verdict row's values are, when it is not the per-case tables' (accept length: medians there, means here)."""
    return f" ({row.value_statistic})" if row.value_statistic and row.candidate_value is not None else ""


def _value(value: float | None, kind: str) -> str:
    if value is None:
        return "–"
    return pct(value) if kind in ("token_rate", "proportion") else fmt(value, 4)


def _spread(doc: Report, analysis: Comparison) -> None:
    doc.heading(2, "Spread between repeats")
    spread = analysis.repeat_spread or {}
    arms = analysis.arm_order
    table = Table(["metric", "case"] + arms, [])
    for metric in analysis.spread_rows:
        kind = kind_of(analysis, metric)
        for case in (spread.get(metric) or {}).values():
            first = next(iter(case.values()))
            cells = [_spread_cell(case[arm], kind) if arm in case else "–" for arm in arms]
            table.rows.append([metric, case_title(first.temperature, first.top_p)] + cells)
    doc.paragraph("Each cell: the per-repeat values in run order, then min–max and the standard deviation.")
    if table.rows:
        doc.table(table)
    else:
        doc.paragraph("No per-repeat values in these results.")


def _spread_cell(entry: SpreadEntry, kind: str) -> str:
    values = ", ".join(_value(v, kind) for v in entry.values)
    if len(entry.values) < 2:
        return values
    return f"{values} (range {_value(entry.min, kind)}–{_value(entry.max, kind)}, sd {_value(entry.sd, kind)})"
