"""The run summary: one Markdown row per arm and sampling case, pooled over repeats.

Reads a merged results.json (the dict) only.  Columns follow the seed's tables: generated tokens,
invalid ids, sampler fallback ids, stray characters per 1200 tokens, accept length, and the
server's own counters where it exports them.  When the reference server says which sampler
decided (`refserver_sampler` in its /server_info), a line per arm under the table names it.
"""

from __future__ import annotations

from typing import Any

# The reference server's counters the table shows: copies of harness.server.refserver_contract's
# names (reports/ imports nothing of harness/); tests/test_metric_registry.py holds them equal.
NONFINITE_COUNTER = "specsuite_refserver:draft_probs_nonfinite_entries_total"
FALLBACK_COUNTER = "specsuite_refserver:sampler_fallback_emissions_total"
COLUMNS = ("arm", "case", "repeats", "tokens", "invalid ids", "fallback ids", "stray / 1200", "accept length (mean of requests)",
           "non-finite draft_probs", "sampler fallbacks")


def _detector(case: dict[str, Any], name: str, key: str = "count") -> float:
    return float((case.get("detectors") or {}).get(name, {}).get(key) or 0)


def pooled_case_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Per (arm, case) totals over every repeat of the arm."""
    rows = []
    for arm, data in (results.get("arms") or {}).items():
        by_case: dict[str, dict[str, Any]] = {}
        for repeat in data.get("repeats", []):
            for case in repeat.get("cases", []):
                row = by_case.setdefault(case["case_id"], {"arm": arm, "case": case["case_id"], "temperature": case.get("temperature"),
                                                            "repeats": 0, "tokens": 0, "invalid": 0, "fallback": 0, "stray": 0,
                                                            "accept": [], "nonfinite": None, "sampler_fallbacks": None})
                row["repeats"] += 1
                row["tokens"] += int(case.get("n_tokens") or 0)
                row["invalid"] += int(_detector(case, "invalid_id"))
                row["fallback"] += int(_detector(case, "fallback_id"))
                row["stray"] += int(_detector(case, "stray_char"))
                row["accept"] += list((case.get("acceptance") or {}).get("per_request") or [])
                counters = case.get("server_counters") or {}
                for key, metric in (("nonfinite", NONFINITE_COUNTER), ("sampler_fallbacks", FALLBACK_COUNTER)):
                    if metric in counters:
                        row[key] = (row[key] or 0) + int(counters[metric])
        rows.extend(by_case.values())
    return rows


def summary_markdown(results: dict[str, Any]) -> str:
    """A Markdown table of `pooled_case_rows`; '-' where the server exports no counter."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in pooled_case_rows(results):
        stray = f"{row['stray'] * 1200 / row['tokens']:.1f}" if row["tokens"] else "-"
        accept = f"{sum(row['accept']) / len(row['accept']):.3f}" if row["accept"] else "-"
        cells = [row["arm"], row["case"], str(row["repeats"]), str(row["tokens"]), str(row["invalid"]), str(row["fallback"]),
                 stray, accept, "-" if row["nonfinite"] is None else str(row["nonfinite"]),
                 "-" if row["sampler_fallbacks"] is None else str(row["sampler_fallbacks"])]
        lines.append("| " + " | ".join(cells) + " |")
    samplers = sampler_lines(results)
    if samplers:
        lines += [""] + samplers
    return "\n".join(lines) + "\n"


def sampler_lines(results: dict[str, Any]) -> list[str]:
    """`sampler of ARM: LABEL on DEVICE, sha256 ...` for every arm whose identity reports one."""
    lines = []
    for arm, data in (results.get("arms") or {}).items():
        sampler = ((data.get("identity") or {}).get("server_args") or {}).get("refserver_sampler")
        if isinstance(sampler, dict):
            digest = f", sha256 {sampler['sha256']}" if sampler.get("sha256") else ""
            lines.append(f"sampler of {arm}: {sampler.get('label')} on {sampler.get('device')}{digest}")
    return lines
