"""The run summary: one Markdown row per arm and sampling case, pooled over repeats.

Reads a merged results.json, typed (specsuite.results.types).  Columns follow the recycled-draft_probs bug report's tables: generated tokens,
invalid ids, sampler fallback ids, stray characters per 1200 tokens, accept length, and the
server's own counters where it exports them.  When the reference server says which sampler
decided (`refserver_sampler` in its /server_info), a line per arm under the table names it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specsuite.results.types import FALLBACK_COUNTER, NONFINITE_COUNTER, ArmIdentity, Document

COLUMNS = ("arm", "case", "repeats", "tokens", "invalid ids", "fallback ids", "stray / 1200", "accept length (mean of requests)",
           "non-finite draft_probs", "sampler fallbacks")


@dataclass
class PooledCase:
    """One arm's totals for one sampling case over every repeat of the arm."""

    arm: str
    case: str
    temperature: float | None
    repeats: int = 0
    tokens: int = 0
    invalid: int = 0
    fallback: int = 0
    stray: int = 0
    accept: list[float] = field(default_factory=list)
    nonfinite: int | None = None  # None: the server does not export the counter
    sampler_fallbacks: int | None = None


def pooled_case_rows(results: Document) -> list[PooledCase]:
    """Per (arm, case) totals over every repeat of the arm."""
    rows = []
    for arm_name, arm in results.arms.items():
        by_case: dict[str, PooledCase] = {}
        for case in arm.cases():
            row = by_case.setdefault(case.case_id, PooledCase(arm_name, case.case_id, case.temperature))
            row.repeats += 1
            row.tokens += int(case.n_tokens or 0)
            row.invalid += int(case.detector("invalid_id"))
            row.fallback += int(case.detector("fallback_id"))
            row.stray += int(case.detector("stray_char"))
            row.accept += list(case.acceptance.per_request or [])
            nonfinite, fallbacks = case.counter(NONFINITE_COUNTER), case.counter(FALLBACK_COUNTER)
            if nonfinite is not None:
                row.nonfinite = (row.nonfinite or 0) + int(nonfinite)
            if fallbacks is not None:
                row.sampler_fallbacks = (row.sampler_fallbacks or 0) + int(fallbacks)
        rows.extend(by_case.values())
    return rows


def summary_markdown(results: Document) -> str:
    """A Markdown table of `pooled_case_rows`; '-' where the server exports no counter."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in pooled_case_rows(results):
        stray = f"{row.stray * 1200 / row.tokens:.1f}" if row.tokens else "-"
        accept = f"{sum(row.accept) / len(row.accept):.3f}" if row.accept else "-"
        cells = [row.arm, row.case, str(row.repeats), str(row.tokens), str(row.invalid), str(row.fallback),
                 stray, accept, "-" if row.nonfinite is None else str(row.nonfinite),
                 "-" if row.sampler_fallbacks is None else str(row.sampler_fallbacks)]
        lines.append("| " + " | ".join(cells) + " |")
    samplers = sampler_lines(results)
    if samplers:
        lines += [""] + samplers
    return "\n".join(lines) + "\n"


def sampler_lines(results: Document) -> list[str]:
    """`sampler of ARM: LABEL on DEVICE, sha256 ...` for every arm whose identity reports one."""
    lines = []
    for name, arm in results.arms.items():
        server_args = ArmIdentity.of(arm).server_args
        sampler = server_args.refserver_sampler if server_args is not None else None
        if sampler is not None:
            digest = f", sha256 {sampler.sha256}" if sampler.sha256 else ""
            lines.append(f"sampler of {name}: {sampler.label} on {sampler.device}{digest}")
    return lines
