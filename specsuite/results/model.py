"""The results model (schema version 3): one shape for every writer and reader.

A session is one repeat of one arm. Every ``results.json`` holds its arms as
``arms.<arm>.repeats[]``, whoever wrote it:

- a pytest session (``pytest suites``) writes each arm it measured with one repeat (the server
  under test, and a ``baseline`` arm with ``--baseline-url``); a kernel-only session has no arms;
- ``specsuite run`` writes every arm with one repeat per pytest session it ran, and the A/B
  analysis under ``ANALYSIS_KEY``;
- ``specsuite gsm8k`` writes one arm with one repeat holding ``workloads.gsm8k``.

The typed model of that shape is specsuite.results.types (``Document`` down to ``Case``,
``Gsm8kRun``, ``BenchRun``, ``KernelSection`` and ``ComparisonRow``); specsuite.results.builder
writes it for every front end (`comparison_of` for the comparisons the A/B engine and the history
build in memory). This module keeps the upgrade of older files, applied by specsuite.results.store.load_results
on the parsed JSON before it is typed (`upgrade`; it reads the raw dict by key because older versions
are not the typed shape):

- version 1 (before 2026-12): a pytest session wrote ``arms.<arm>.cases`` and
  ``arms.<arm>.workloads`` directly; ``specsuite run`` already wrote repeats. 1 -> 2 moves them
  into one repeat.
- version 2: a repeat could lack ``cases`` (a benchmark-only or failed session), ``workloads`` or
  its ``repeat`` number. 2 -> 3 fills them (``[]``, ``{}``, its 1-based place), so that every
  repeat of a version-3 document has all three and readers need no defaults for them.

An upgraded document says ``upgraded_from`` (the version it was written with).
"""

from __future__ import annotations

from typing import Any

from specsuite.results.types import ANALYSIS_KEY, FAIL_ON_KEY, SCHEMA_VERSION, Document

__all__ = ["ANALYSIS_KEY", "FAIL_ON_KEY", "SCHEMA_VERSION", "complete_arms", "upgrade", "upgraded_document"]


def upgraded_document(parsed: dict[str, Any]) -> Document:
    """A parsed results dict (any schema version) upgraded, then typed: the one way a dict becomes a `Document`
    (specsuite.results.store.load_results reads files through it; in-memory dicts, e.g. tests', go the same way)."""
    return Document.from_dict(upgrade(parsed))


def upgrade(document: dict[str, Any]) -> dict[str, Any]:
    """A results document in the current shape (a copy when it changes; the argument is never changed).

    Arms are reshaped by what they hold, whatever the label says, so that a hand-built version-1
    dict reads the same: 1 -> 2 (cases and workloads into one repeat), then 2 -> 3 (every repeat has
    ``repeat``, ``cases`` and ``workloads``). An older label becomes ``SCHEMA_VERSION`` and the
    document remembers ``upgraded_from``.
    """
    # The parsed JSON, read by key: an older file is not the typed shape until this has run.
    version = document.get("schema_version")
    arms = document.get("arms")
    reshaped = {name: _upgrade_arm(arm, document.get("seed")) for name, arm in arms.items()} if isinstance(arms, dict) else arms
    if reshaped == arms and not (isinstance(version, int) and version < SCHEMA_VERSION):
        return document
    upgraded: dict[str, Any] = {**document, "arms": reshaped} if isinstance(arms, dict) else dict(document)
    if isinstance(version, int) and version < SCHEMA_VERSION:
        upgraded.update(schema_version=SCHEMA_VERSION, upgraded_from=version)
    return upgraded


def complete_arms(arms: dict[str, Any]) -> dict[str, Any]:
    """Arms about to be written as results.json, every repeat complete (version 3: its number, cases and
    workloads); each arm upgraded on its own (an arm written without repeats gets one, with no run seed)."""
    return {name: _upgrade_arm(arm, None) for name, arm in arms.items()}


def _upgrade_arm(arm: Any, seed: int | None) -> Any:
    return _v2_to_v3(_v1_to_v2(arm, seed))


def _v1_to_v2(arm: Any, seed: int | None) -> Any:
    """Version 1's pytest-session arm (`cases`, `workloads` at arm level) as an arm of one repeat."""
    if not isinstance(arm, dict) or "repeats" in arm:
        return arm
    rest = {key: value for key, value in arm.items() if key not in ("cases", "workloads")}
    return {**rest, "repeats": [{"repeat": 1, "seed": seed, "cases": list(arm.get("cases") or []),
                                 "workloads": dict(arm.get("workloads") or {})}]}


def _v2_to_v3(arm: Any) -> Any:
    """Every repeat with its number, its cases and its workloads (version 2 could leave them out)."""
    if not isinstance(arm, dict) or not isinstance(arm.get("repeats"), list):
        return arm
    repeats = [_complete_repeat(repeat, place) for place, repeat in enumerate(arm["repeats"], start=1)]
    return arm if repeats == arm["repeats"] else {**arm, "repeats": repeats}


def _complete_repeat(repeat: Any, place: int) -> Any:
    if not isinstance(repeat, dict) or all(key in repeat for key in ("repeat", "cases", "workloads")):
        return repeat
    return {"repeat": place, **repeat, "cases": repeat.get("cases") or [], "workloads": repeat.get("workloads") or {}}
