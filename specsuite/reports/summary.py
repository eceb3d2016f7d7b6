"""summary.md, `specsuite run`'s short account: some of the report's blocks, chosen by what they say, plus the run's outcome.

The blocks come from the one report builder (specsuite/reports/overview.py `build_report`), picked by their
`Role`: the server under test, the verdict lines and the caveats that go with them (arms side by
side, a synthetic GSM8K set, what did not run), and the raw totals per arm and case.  What only the
run knows (whether it finished, what its gates found, why it exits as it does) is given by the caller.
"""

from __future__ import annotations

from collections.abc import Sequence

from specsuite.reports.blocks import Paragraph, Report, Role, VerdictList
from specsuite.reports.document import per_case_counts
from specsuite.reports.markdown import block_markdown, bullet_list
from specsuite.reports.overview import build_report
from specsuite.results.types import Document

VERDICT_NOTES = (Role.FAILURES, Role.SIDE_BY_SIDE, Role.FAMILY_CAVEAT, Role.NOT_RUN)  # in page order, after the verdict lines
NO_VERDICTS = "no A/B verdicts (fewer than two arms with data)"


def _verdict_texts(report: Report) -> list[str]:
    """The verdict lines, then the notes on them, as one list of Markdown lines."""
    texts = [line.text for block in report.with_role(Role.VERDICT_LINES) if isinstance(block, VerdictList) for line in block.lines]
    return texts + [block.text for role in VERDICT_NOTES for block in report.with_role(role) if isinstance(block, Paragraph)]


def run_verdict_lines(results: Document) -> list[str]:
    """The report's verdict lines, then what is unusual about them (arms side by side, a synthetic GSM8K, what did not run)."""
    return _verdict_texts(build_report(results, [], []))


def unfinished_arms(document: Document) -> list[str]:
    """Arms of the run (in order) with no case and no workload in any repeat."""
    finished = {name for name, arm in document.arms.items()
                if any(repeat.cases or repeat.workloads.to_dict() for repeat in arm.repeats)}
    return [name for name in document.ordered_arms() if name not in finished]


def summary_document(document: Document, policy: str, gates: Sequence[str] = (), gate_verdicts: Sequence[str] = ()) -> str:
    """summary.md: the server under test, the verdict lines (`gate_verdicts`: the absolute gate's, after the
    families'), what the gates found and the exit policy, then the per-case counts."""
    report = build_report(document, [], [])
    lines = [block_markdown(block) for block in report.with_role(Role.SERVER_UNDER_TEST)] + [""]
    unfinished = document.status not in (None, "complete")
    if unfinished:  # an interrupted or failed run says so before any verdict
        why = document.stopped_at or document.error or ""
        lines += [f"**Run {document.status}**" + (f" ({why})" if why else "") + ": the verdicts cover what finished.", ""]
    lines += ["## Verdict", "", bullet_list(_verdict_texts(report) + list(gate_verdicts) or [NO_VERDICTS])]
    if unfinished:  # an arm that had nothing yet is named, not dropped
        lines += [f"- **{name}**: no results: it had finished nothing when the run stopped" for name in unfinished_arms(document)]
    if gates:
        lines += ["", "## Gate", "", bullet_list(list(gates))]
    counts = report.with_role(Role.PER_CASE_COUNTS) or [per_case_counts(document)]  # the report shows them only without an analysis
    lines += ["", f"Exit policy: {policy}.", "", "## Per case", "", *(block_markdown(block) + "\n" for block in counts)]
    return "\n".join(lines)
