"""The report as a reader with five seconds sees it: verdicts first, then figures, then tables.

`build_report(results, figures, notes)` lays out the page as typed blocks (specsuite/reports/blocks.py), which the
Markdown and HTML renderers draw whole and summary.md draws in part (specsuite/reports/summary.py):

1. the server under test (specsuite/reports/server_under_test.py), always first;
2. the title and one line of provenance (created, specsuite version, profile, seeds, wall time);
3. the verdict: one line per arm and workload family (correctness, GSM8K, serving benchmark,
   lossless, integrity, and any other the harness registers), the candidates' from the A/B
   comparisons, the baseline's as its own figures; an explanation of each unusual verdict shown
   (e.g. "suspect"); one line naming what did not run;
4. the figures;
5. the tables of specsuite/reports/document.py (with each family's own section), less every row and section
   that holds nothing but "not run", then the setup (arms, servers, seeds, how verdicts are decided).

Verdict strings are rendered as they come (any string the analysis holds).  The families, their
labels, how their lines read and each arm's figures come from the analysis's family table
(`families`, specsuite/families/), metric labels and display formats from its metric table; an older
analysis without a family table reads its families from its metrics' sources.  Nothing here computes
statistics: every number is read from the typed results (specsuite.results.types).
"""

from __future__ import annotations

from specsuite.reports.blocks import FigureRef, ParagraphStyle, Report, Role, VerdictLine, VerdictList
from specsuite.reports.document import NONE_IN_EITHER, add_tables, header_value, metric_fact
from specsuite.reports.server_under_test import server_under_test_line
from specsuite.results.types import Comparison, ComparisonRow, Effect, FamilyFacts
from specsuite.results.types import Document as ResultsDocument

# The order of a line's verdicts: the corruption itself first, then what it disguises itself as
# (unknown verdicts sit between "better" and the calm ones).
SEVERITY = {"worse": 0, "suspect": 1, "better": 2, "inconclusive": 8, "equivalent": 9, NONE_IN_EITHER: 10}
UNKNOWN_SEVERITY = 5
CALM = ("inconclusive", "equivalent", NONE_IN_EITHER)
# One line on each verdict that needs one; shown under the verdict lines when the verdict appears.
EXPLAINED = {
    "suspect": ("**suspect**: the arm's accept length is higher while it emits invalid or fallback ids: the signature "
                "of corrupt draft probabilities accepted by the sampler, not a faster draft model."),
}
NO_ANALYSIS = "No A/B analysis in this results file; `specsuite report RESULTS.json --out DIR` computes it."
SIDE_BY_SIDE_NOTE = ("The arms ran side by side on one host: each arm's serving figures include the other arm's load, "
                     "so small ITL and throughput differences are not the servers' (`--arm-schedule sequential` runs one at a time).")


def _family(analysis: Comparison, metric: str) -> str:
    return analysis.facts(metric).source or ""


def families(analysis: Comparison) -> dict[str, FamilyFacts]:
    """The analysis's workload families in order; an older analysis's, from its metrics' sources (named by them)."""
    if analysis.families:
        return analysis.families
    sources = dict.fromkeys(str(facts.source) for facts in analysis.metrics.values() if facts.source)
    return {source: FamilyFacts(label=source, effect_in_line=True, where_in_line=True) for source in sources}


def _short(analysis: Comparison, metric: str) -> str:
    """A verdict line's name for a metric: the registry's `short`, carried in the analysis."""
    return metric_fact(analysis, metric, "short")


def _severity(verdict: str) -> int:
    return SEVERITY.get(verdict, UNKNOWN_SEVERITY)


def _ran(analysis: Comparison, family: str) -> bool:
    return any(_family(analysis, row.metric) == family for row in analysis.estimates)


def _effect(row: ComparisonRow) -> str:
    """The effect, short: points for differences, a signed percentage for relative changes."""
    effect = row.effect or Effect()
    value, scale = effect.value, effect.scale
    if value is None:
        return ""
    if scale == "difference":
        return f"{value * 100:+.0f} pt".replace("-", "−")
    if scale == "relative":
        return f"{value * 100:+.1f}%".replace("-", "−")
    return ""


def _case_of(row: ComparisonRow) -> tuple[float | None, float | None] | str | None:
    """A row's case: its sampling setting, or its case id where no setting names it."""
    return (row.temperature, row.top_p) if row.temperature is not None else row.case_id


def _where(rows: list[ComparisonRow], total_cases: int) -> str:
    cases = {_case_of(r) for r in rows}
    if len(cases) == total_cases and total_cases > 1:
        return "every case"
    if len(cases) == 1:
        row = rows[0]
        if row.temperature is None:
            return str(row.case_id)
        return f"T={row.temperature:g}" + ("" if row.top_p == 1 else f" top_p={row.top_p:g}")
    return f"{len(cases)} of {total_cases} cases"


def _candidate_line(analysis: Comparison, arm: str, family: str, rows: list[ComparisonRow]) -> VerdictLine:
    """`worse on A, B (4 of 5 cases); suspect on acceptance; equivalent elsewhere`, ordered by severity."""
    facts = families(analysis).get(family, FamilyFacts())
    total_cases = len({_case_of(r) for r in rows})
    by_metric: dict[str, list[ComparisonRow]] = {}
    for row in rows:
        by_metric.setdefault(row.metric, []).append(row)
    groups: dict[str, list[tuple[str, list[ComparisonRow]]]] = {}
    for metric_rows in by_metric.values():
        headline = min((r.shown_verdict() for r in metric_rows), key=_severity)
        hits = [r for r in metric_rows if r.shown_verdict() == headline]
        groups.setdefault(headline, []).append((_short(analysis, metric_rows[0].metric), hits))
    parts, named = [], []
    for verdict in sorted(groups, key=_severity):
        if verdict in CALM:
            continue
        named.append(verdict)
        items = []
        for label, hits in groups[verdict]:
            effect = _effect(hits[0]) if facts.effect_in_line and len(hits) == 1 else ""
            items.append(label + (f" {effect}" if effect else ""))
        where = _where([r for _, hits in groups[verdict] for r in hits], total_cases) if facts.where_in_line else ""
        parts.append(f"**{verdict}** on {', '.join(items)}" + (f" ({where})" if where else ""))
    calm = [v for v in CALM if v in groups]
    if calm == [NONE_IN_EITHER] and not parts:  # the whole line: "none in either arm on every row" said it twice
        parts.append(f"**{NONE_IN_EITHER}**")
        named += calm
    elif calm:
        rest = "the rest" if parts else "every row"
        parts.append(f"{' or '.join(f'**{v}**' for v in calm)} on {rest}")
        named += calm
    return VerdictLine(arm, family, "; ".join(parts) or "no comparisons", named)


def verdict_lines(document: ResultsDocument) -> list[VerdictLine]:
    """One line per arm and family that ran: candidates by their verdicts, the baseline by its figures."""
    analysis = document.analysis
    if analysis is None:
        return []
    baseline = analysis.baseline
    lines = []
    for arm in analysis.arm_order:
        for family, facts in families(analysis).items():
            # A one-server run has a candidate and nothing to compare it with: no arm is anyone's baseline.
            role = " (baseline)" if arm == baseline and len(analysis.arm_order) > 1 and arm != "baseline" else ""
            reason = errored_reason(document, arm, family)
            if reason:
                lines.append(VerdictLine(arm, family, f"**{arm}**{role} · {facts.label}: **errored**: {reason}", ["errored"]))
                continue
            if not _ran(analysis, family):
                continue
            state = facts.state.get(arm, "")
            if arm == baseline:
                line = VerdictLine(arm, family, state or "no figures")
            else:
                rows = [r for r in analysis.comparisons if r.candidate == arm and _family(analysis, r.metric) == family]
                if not rows:
                    continue
                line = _candidate_line(analysis, arm, family, rows)
                if state:
                    line.text += f" — {state}"
            line.text = f"**{arm}**{role} · {facts.label}: {line.text}"
            lines.append(line)
    return lines


def errored_reason(document: ResultsDocument, arm: str, family: str) -> str | None:
    """Why a family has no data from an arm although its tests ran: the first error (else failure) message of its
    suite's tests (the family's `suite_module`) in the arm's sessions (`repeats[].tests`, from their JUnit XML); None
    when it has data or none ran."""
    analysis = document.analysis
    if analysis is not None and any(r.arm == arm and _family(analysis, r.metric) == family for r in analysis.estimates):
        return None
    module = families(analysis).get(family, FamilyFacts()).suite_module if analysis is not None else None
    measured = document.arms.get(arm)
    failed = [f for r in (measured.repeats if measured is not None else []) for f in (r.tests.failed if r.tests is not None else [])
              if module and f.module == module]
    if not failed:
        return None
    first = next((f for f in failed if f.kind == "error"), failed[0])
    return str(first.message or f"{first.test} {first.kind}")


def side_by_side_note(document: ResultsDocument) -> str | None:
    """The caveat every timing verdict carries when the arms ran side by side (None otherwise)."""
    analysis = document.analysis
    if document.side_by_side and analysis is not None and _ran(analysis, "bench"):
        return SIDE_BY_SIDE_NOTE
    return None


def not_run_line(document: ResultsDocument) -> str | None:
    """`Not run: GSM8K, serving benchmark.` (None when everything ran)."""
    analysis = document.analysis
    if analysis is None:
        return None
    reported = {family: facts for family, facts in families(analysis).items() if facts.reported_when_absent}
    missing = [str(facts.label) for family, facts in reported.items() if not _ran(analysis, family)
               and not any(errored_reason(document, arm, family) for arm in analysis.arm_order)]  # those say "errored"
    if (document.repeats or 1) < 2:
        missing.append("spread between repeats (one repeat per arm; `--repeats N` measures it)")
    if not missing:
        return None
    narrowed = document.markers and any(not _ran(analysis, family) for family in reported)
    markers = f" (`-m {document.markers}`)" if narrowed else ""
    return f"Not run{markers}: {', '.join(missing)}."


def provenance_line(document: ResultsDocument) -> str:
    """Created, version, profile, seeds, repeats and wall time: what a rerun needs."""
    parts = [f"status **{header_value(document, 'status', 'unknown')}**" + (f" ({document.error})" if document.error else "")
             + (f" (stopped {document.stopped_at})" if document.stopped_at else ""),
             f"created {header_value(document, 'created_utc')}", f"specsuite {header_value(document, 'specsuite_version')}",
             f"profile {header_value(document, 'profile')}", f"base seed {header_value(document, 'seed')}",
             f"{header_value(document, 'repeats')} repeat(s) per arm"]
    if document.side_by_side:
        parts.append("arms side by side")
    wall = document.sessions_wall_time_s
    if isinstance(wall, (int, float)):
        parts.append(f"wall {wall:.0f} s")
    return " · ".join(parts)


def build_report(document: ResultsDocument, figures: list[FigureRef], figure_notes: list[str]) -> Report:
    """The whole page (module docstring): the blocks every renderer draws, Markdown, HTML and summary.md alike."""
    report = Report(title=f"specsuite report: {header_value(document, 'run_id', 'run')}")
    # First: a report must not pass for another server's.
    report.paragraph(server_under_test_line(document), ParagraphStyle.BANNER, Role.SERVER_UNDER_TEST)
    report.heading(1, report.title)
    report.paragraph(provenance_line(document), ParagraphStyle.PROVENANCE)
    _verdict_section(report, document)
    if figures or figure_notes:
        report.heading(2, "Figures")
        report.blocks.extend(figures)
        report.bullets(figure_notes)
    add_tables(report, document)
    return report


def _verdict_section(report: Report, document: ResultsDocument) -> None:
    """The verdict lines, an explanation of each unusual verdict, then the caveats and notes that go with them."""
    lines = verdict_lines(document)
    report.heading(2, "Verdict")
    analysis = document.analysis
    if lines:
        report.blocks.append(VerdictList(lines))
    elif analysis is not None:
        report.paragraph("No A/B verdicts: the results hold fewer than two arms with data.")
    else:
        report.paragraph(NO_ANALYSIS)
    for failure in document.failures:  # failed tests, failed and timed-out requests: each with its reason
        report.paragraph(f"**failed** · {failure.line}", role=Role.FAILURES)
    shown = {verdict for line in lines for verdict in line.verdicts}
    report.bullets([text for verdict, text in EXPLAINED.items() if verdict in shown])
    caveat = side_by_side_note(document)
    if caveat:
        report.paragraph(caveat, role=Role.SIDE_BY_SIDE)
    for name, family in (analysis.families if analysis is not None else {}).items():
        if family.caveat and _ran(analysis, name):  # the synthetic GSM8K set: never read as a real score
            report.paragraph(family.caveat, ParagraphStyle.NOTE, Role.FAMILY_CAVEAT)
    missing = not_run_line(document)
    if missing:
        report.paragraph(missing, ParagraphStyle.NOTE, Role.NOT_RUN)
    for line in document.warnings:
        report.paragraph(f"warning: {line}", ParagraphStyle.NOTE)
