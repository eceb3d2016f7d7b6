"""CSV export: the A/B analysis as one long table, one row per estimate, per-repeat value or comparison.

The `section` column says which: "estimate" (an arm's pooled value and 95 % interval), "repeat"
(one repeat's value) or "comparison" (candidate against baseline, with effect, p-values, MDE and
verdict).  Without an analysis in the results, the raw per-arm totals are written ("raw").
Empty cells mean "does not apply"; an open interval end is written as "inf".
"""

from __future__ import annotations

import csv
import io
from typing import Any

from specsuite.reports.summary_table import pooled_case_rows
from specsuite.results.types import Document, Effect, Mde

COLUMNS = ("section", "metric", "case_id", "temperature", "top_p", "arm", "baseline", "repeat", "value", "ci_low",
           "ci_high", "unit", "k", "n", "candidate_value", "baseline_value", "effect_name", "effect_scale", "effect_value",
           "effect_ci_low", "effect_ci_high", "p_value", "p_adjusted", "mde", "mde_scale", "threshold", "verdict", "test", "note")


def _bounds(ci: list[float | None] | None, infinite: str = "inf") -> tuple[Any, Any]:
    if not ci:
        return "", ""
    return tuple(infinite if v is None else v for v in ci)  # type: ignore[return-value]


def csv_rows(results: Document) -> list[dict[str, Any]]:
    """The rows `render_csv` writes, as dicts keyed by COLUMNS."""
    analysis = results.analysis
    if analysis is None:
        return [{"section": "raw", "case_id": r.case, "temperature": r.temperature, "arm": r.arm, "metric": metric,
                 "value": getattr(r, key), "n": r.tokens, "unit": "events", "repeat": ""}
                for r in pooled_case_rows(results)
                for metric, key in (("invalid_ids", "invalid"), ("fallback_ids", "fallback"), ("stray_chars", "stray"))]
    rows: list[dict[str, Any]] = []
    for est in analysis.estimates:
        low, high = _bounds(est.ci)
        rows.append({"section": "estimate", "metric": est.metric, "case_id": est.case_id, "temperature": est.temperature,
                     "top_p": est.top_p, "arm": est.arm, "value": est.value, "ci_low": low, "ci_high": high,
                     "unit": est.unit, "k": est.k, "n": est.n, "note": est.note})
    for metric, cases in (analysis.repeat_spread or {}).items():
        for case_id, arms in cases.items():
            for arm, entry in arms.items():
                for repeat, value in zip(entry.repeats, entry.values, strict=False):
                    rows.append({"section": "repeat", "metric": metric, "case_id": case_id, "temperature": entry.temperature,
                                 "top_p": entry.top_p, "arm": arm, "repeat": repeat, "value": value, "unit": entry.unit})
    for comp in analysis.comparisons:
        effect, mde = comp.effect or Effect(), comp.mde or Mde()
        low, high = _bounds(effect.ci)
        value = effect.value
        if value is None and effect.scale == "ratio" and comp.events is not None and comp.events.candidate:
            value = "inf"  # events over a zero-event baseline
        rows.append({"section": "comparison", "metric": comp.metric, "case_id": comp.case_id,
                     "temperature": comp.temperature, "top_p": comp.top_p, "arm": comp.candidate,
                     "baseline": comp.baseline, "unit": comp.unit, "candidate_value": comp.candidate_value,
                     "baseline_value": comp.baseline_value, "effect_name": effect.name,
                     "effect_scale": effect.scale, "effect_value": value, "effect_ci_low": low,
                     "effect_ci_high": high, "p_value": comp.p_value, "p_adjusted": comp.p_adjusted,
                     "mde": mde.value, "mde_scale": mde.scale, "threshold": comp.threshold,
                     "verdict": comp.verdict, "test": comp.test, "note": comp.note})
    return rows


def render_csv(results: Document) -> str:
    """CSV text with a header row of COLUMNS."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in csv_rows(results):
        writer.writerow({key: "" if row.get(key) is None else row[key] for key in COLUMNS})
    return buffer.getvalue()
