"""The results model (schema version 3): one shape for every writer and reader.

A session is one repeat of one arm. Every ``results.json`` holds its arms as
``arms.<arm>.repeats[]``, whoever wrote it:

- a pytest session (``pytest suites``) writes each arm it measured with one repeat (the server
  under test, and a ``baseline`` arm with ``--baseline-url``); a kernel-only session has no arms;
- ``specsuite run`` writes every arm with one repeat per pytest session it ran, and the A/B
  analysis under ``ANALYSIS_KEY``;
- ``specsuite gsm8k`` writes one arm with one repeat holding ``workloads.gsm8k``.

The typed model of that shape is harness.results.types (``Document`` down to ``Case``,
``Gsm8kRun``, ``BenchRun``, ``KernelSection`` and ``ComparisonRow``); harness.results.builder
writes it for every front end. This module keeps the dict-level view the A/B engine and the
history read, and the upgrade of older files, applied on load (`upgrade`):

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

from harness.results.builder import comparison_of
from harness.results.types import ANALYSIS_KEY, FAIL_ON_KEY, SCHEMA_VERSION

# The dict shapes (the typed model is harness.results.types; these aliases keep the names the
# A/B engine and the history annotate with).
Repeat = dict[str, Any]
ResultsDocument = dict[str, Any]

__all__ = ["ANALYSIS_KEY", "FAIL_ON_KEY", "SCHEMA_VERSION", "Repeat", "ResultsDocument", "comparison_document",
           "session_repeat", "upgrade"]


def session_repeat(cases: list[dict[str, Any]], workloads: dict[str, Any], seed: int | None) -> Repeat:
    """The one repeat a pytest session writes for an arm it measured."""
    return {"repeat": 1, "seed": seed, "cases": cases, "workloads": workloads}


def comparison_document(arms: dict[str, list[Repeat]], baseline: str) -> ResultsDocument:
    """Arms given as their repeats, as a document the A/B (`compare_arms`) reads: the candidates in
    the order given, the baseline last. For comparisons built in memory (the ab suite, the nightly
    baseline from the history, the perf suite's interleaved benchmark runs); laid out by
    harness.results.builder.comparison_of."""
    return comparison_of(arms, baseline).to_dict()


def upgrade(document: dict[str, Any]) -> ResultsDocument:
    """A results document in the current shape (a copy when it changes; the argument is never changed).

    Arms are reshaped by what they hold, whatever the label says, so that a hand-built version-1
    dict reads the same: 1 -> 2 (cases and workloads into one repeat), then 2 -> 3 (every repeat has
    ``repeat``, ``cases`` and ``workloads``). An older label becomes ``SCHEMA_VERSION`` and the
    document remembers ``upgraded_from``.
    """
    version = document.get("schema_version")
    arms = document.get("arms")
    reshaped = {name: _upgrade_arm(arm, document.get("seed")) for name, arm in arms.items()} if isinstance(arms, dict) else arms
    if reshaped == arms and not (isinstance(version, int) and version < SCHEMA_VERSION):
        return document
    upgraded: dict[str, Any] = {**document, "arms": reshaped} if isinstance(arms, dict) else dict(document)
    if isinstance(version, int) and version < SCHEMA_VERSION:
        upgraded.update(schema_version=SCHEMA_VERSION, upgraded_from=version)
    return upgraded


def _upgrade_arm(arm: Any, seed: int | None) -> Any:
    return _v2_to_v3(_v1_to_v2(arm, seed))


def _v1_to_v2(arm: Any, seed: int | None) -> Any:
    """Version 1's pytest-session arm (`cases`, `workloads` at arm level) as an arm of one repeat."""
    if not isinstance(arm, dict) or "repeats" in arm:
        return arm
    rest = {key: value for key, value in arm.items() if key not in ("cases", "workloads")}
    return {**rest, "repeats": [session_repeat(list(arm.get("cases") or []), dict(arm.get("workloads") or {}), seed)]}


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
