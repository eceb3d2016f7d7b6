"""The first line of every report: which server the results belong to.

Read from results.json's `server_under_test` (and each arm's, for `specsuite run`). When the
results came from the reference emulation (the embedded default, or a reference server reached
by URL or launch), the line says so first, so a report cannot pass for a real server's. Results
written before the field existed are judged by their identities: a reference server reports
`refserver_arm` among its server args; without either, the line says the server is not recorded.
"""

from __future__ import annotations

from typing import Any

from harness.results.types import Document

EMBEDDED_LINE = ("**Server under test: the embedded reference emulation** (CPU `refserver`, not a real SGLang "
                 "server; no server URL was given). These results say nothing about a real deployment.")
EMULATION_LINE = ("**Server under test: the reference emulation** (CPU `refserver`, not a real SGLang server) "
                  "at {where}.")
REAL_LINE = "Server under test: {where}."
REFERENCE_MARKER_KEY = "refserver_arm"  # a /server_info key only the reference server reports
KERNEL_ONLY_LINE = "No server under test: a kernel-only session, the sampler kernel {label} on {device}."
UNRECORDED_LINE = "Server under test: not recorded in this results file (written before specsuite recorded it)."


def _arm_records(document: Document) -> dict[str, dict[str, Any]]:
    return {name: arm.server_under_test for name, arm in document.arms.items() if isinstance(arm.server_under_test, dict)}


def _where(document: Document, records: dict[str, dict[str, Any]]) -> str:
    parts = []
    for name, arm in document.arms.items():
        record = records.get(name) or {}
        identity = arm.identity if isinstance(arm.identity, dict) else {}
        if not record and not identity:  # its sessions never reached a server: say so, guess nothing
            parts.append(f"{name} (not reached)")
            continue
        url = record.get("url") or identity.get("base_url") or "?"
        version = record.get("version") or identity.get("version")
        parts.append(f"{name} {url}" + (f" (version {version})" if version else ""))
    return ", ".join(parts) or "?"


def _identities(document: Document) -> list[dict[str, Any]]:
    return [arm.identity for arm in document.arms.values() if isinstance(arm.identity, dict)]


def server_under_test_line(results: dict[str, Any] | Document) -> str:
    """One Markdown line naming the server under test, the emulation warning first."""
    document = Document.of(results)
    top = document.server_under_test
    records = _arm_records(document)
    if not isinstance(top, dict) and not records:
        identities = _identities(document)
        if any(REFERENCE_MARKER_KEY in (identity.get("server_args") or {}) for identity in identities):
            return EMULATION_LINE.format(where=_where(document, records))
        if identities:
            return REAL_LINE.format(where=_where(document, records))
        return UNRECORDED_LINE
    if isinstance(top, dict) and top.get("kernel_only"):
        kernel = document.kernel
        return KERNEL_ONLY_LINE.format(label=kernel.label if kernel and kernel.label else "?",
                                       device=kernel.device if kernel and kernel.device else "?")
    every = [top] if isinstance(top, dict) else []
    every += list(records.values())
    if any(record.get("embedded_reference") for record in every):
        return EMBEDDED_LINE
    if any(record.get("reference_emulation") for record in every):
        return EMULATION_LINE.format(where=_where(document, records))
    return REAL_LINE.format(where=_where(document, records))
