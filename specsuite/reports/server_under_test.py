"""The first line of every report: which server the results belong to.

Read from results.json's `server_under_test` (and each arm's, for `specsuite run`). When the
results came from the reference emulation (the embedded default, or a reference server reached
by URL or launch), the line says so first, so a report cannot pass for a real server's. Results
written before the field existed are judged by their identities: a reference server reports
`refserver_arm` among its server args; without either, the line says the server is not recorded.
"""

from __future__ import annotations

from specsuite.results.types import ArmIdentity, Document, ServerChoice

EMBEDDED_LINE = ("**Server under test: the embedded reference emulation** (CPU `refserver`, not a real SGLang "
                 "server; no server URL was given). These results say nothing about a real deployment.")
EMULATION_LINE = ("**Server under test: the reference emulation** (CPU `refserver`, not a real SGLang server) "
                  "at {where}.")
REAL_LINE = "Server under test: {where}."
KERNEL_ONLY_LINE = "No server under test: a kernel-only session, the sampler kernel {label} on {device}."
UNRECORDED_LINE = "Server under test: not recorded in this results file (written before specsuite recorded it)."


def _arm_choices(document: Document) -> dict[str, ServerChoice]:
    """Each arm's record of how its server was chosen, where it has one."""
    return {name: ServerChoice.from_dict(arm.server_under_test) for name, arm in document.arms.items()
            if isinstance(arm.server_under_test, dict)}


def _where(document: Document, choices: dict[str, ServerChoice]) -> str:
    parts = []
    for name, arm in document.arms.items():
        choice = choices.get(name) or ServerChoice()
        identity = ArmIdentity.of(arm)
        if not choice.to_dict() and not identity.to_dict():  # its sessions never reached a server: say so, guess nothing
            parts.append(f"{name} (not reached)")
            continue
        url = choice.url or identity.base_url or "?"
        version = choice.version or identity.version
        parts.append(f"{name} {url}" + (f" (version {version})" if version else ""))
    return ", ".join(parts) or "?"


def server_under_test_line(document: Document) -> str:
    """One Markdown line naming the server under test, the emulation warning first."""
    top = ServerChoice.from_dict(document.server_under_test) if isinstance(document.server_under_test, dict) else None
    choices = _arm_choices(document)
    if top is None and not choices:
        identities = [ArmIdentity.of(arm) for arm in document.arms.values() if isinstance(arm.identity, dict)]
        if any(identity.is_reference() for identity in identities):
            return EMULATION_LINE.format(where=_where(document, choices))
        if identities:
            return REAL_LINE.format(where=_where(document, choices))
        return UNRECORDED_LINE
    if top is not None and top.kernel_only:
        kernel = document.kernel
        return KERNEL_ONLY_LINE.format(label=kernel.label if kernel and kernel.label else "?",
                                       device=kernel.device if kernel and kernel.device else "?")
    every = ([top] if top is not None else []) + list(choices.values())
    if any(choice.embedded_reference for choice in every):
        return EMBEDDED_LINE
    if any(choice.reference_emulation for choice in every):
        return EMULATION_LINE.format(where=_where(document, choices))
    return REAL_LINE.format(where=_where(document, choices))
