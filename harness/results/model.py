"""The results model (schema version 2): one shape for every writer and reader.

A session is one repeat of one arm. Every ``results.json`` holds its arms as
``arms.<arm>.repeats[]``, whoever wrote it:

- a pytest session (``pytest suites``) writes each arm it measured with one repeat (the server
  under test, and a ``baseline`` arm with ``--baseline-url``); a kernel-only session has no arms;
- ``specsuite run`` writes every arm with one repeat per pytest session it ran, and the A/B
  analysis under ``ANALYSIS_KEY``;
- ``specsuite gsm8k`` writes one arm with one repeat holding ``workloads.gsm8k``.

``specsuite report``, ``specsuite history`` and the A/B read that one shape. Version 1 files
(before 2026-12) are upgraded on load by `upgrade`: there a pytest session wrote
``arms.<arm>.cases`` and ``arms.<arm>.workloads`` directly, and ``specsuite run`` already wrote
repeats. The TypedDicts say which keys each level has; values the workloads own (a case's
detectors, a GSM8K run, a bench summary) stay plain dicts, described by their writers.
"""

from __future__ import annotations

from typing import Any, TypedDict

SCHEMA_VERSION = 2
ANALYSIS_KEY = "ab_compare"  # the A/B analysis (harness.compare.verdicts.compare_arms)
FAIL_ON_KEY = "fail_on"  # the --fail-on outcome (harness.compare.fail_on)


class Repeat(TypedDict, total=False):
    """One session of one arm: its cases and workloads. `specsuite run` adds how it ran."""

    repeat: int  # 1-based, in run order
    seed: int | None
    cases: list[dict[str, Any]]  # one per sampling case: CaseResult.to_dict()
    workloads: dict[str, Any]  # gsm8k: [one per temperature], bench: {...}, integrity_checks: {...}, ...
    # written by `specsuite run` only:
    exit_code: int | None
    session_dir: str
    log: str
    session_status: str | None
    wall_time_s: float
    warnings: list[str]
    error: str
    identity: dict[str, Any] | None
    vocab: dict[str, Any] | None
    server_under_test: dict[str, Any] | None
    command: list[str]  # the pytest session's argv (one part), or absent
    markers: str  # the -m expression the session ran
    running: bool  # a part still runs (a partial merge)
    parts: list[dict[str, Any]]  # a repeat run as several sessions: {markers, session_dir, log, exit_code, wall_time_s, command}


class Arm(TypedDict, total=False):
    """One server (build) under test, and its repeats."""

    server_under_test: dict[str, Any]  # how it was chosen; whether it was the reference emulation
    identity: dict[str, Any]  # ServerIdentity.to_dict()
    vocab: dict[str, Any]  # VocabInfo.to_dict()
    spec: dict[str, Any]  # `specsuite run`: {name, url, launch}
    repeats: list[Repeat]


class ResultsDocument(TypedDict, total=False):
    """A whole results.json. The first five keys are always there (harness.results.store writes them)."""

    schema_version: int
    created_utc: str
    specsuite_version: str
    run_id: str
    status: str  # running | complete | interrupted | failed
    stopped_at: str  # interrupted runs: where
    error: str  # failed runs: why
    server_under_test: dict[str, Any]
    seed: int | None
    profile: str | None
    command: str
    warnings: list[str]
    faults: dict[str, Any] | None
    repeats: int  # `specsuite run`: repeats per arm
    arm_order: list[str]
    baseline_arm: str
    arms: dict[str, Arm]
    kernel: dict[str, Any]  # the kernel suite's section
    ab_compare: dict[str, Any]  # ANALYSIS_KEY
    fail_on: dict[str, Any]  # FAIL_ON_KEY


def session_repeat(cases: list[dict[str, Any]], workloads: dict[str, Any], seed: int | None) -> Repeat:
    """The one repeat a pytest session writes for an arm it measured."""
    return {"repeat": 1, "seed": seed, "cases": cases, "workloads": workloads}


def comparison_document(arms: dict[str, list[Repeat]], baseline: str) -> ResultsDocument:
    """Arms given as their repeats, as a document the A/B (`compare_arms`) reads: the candidates in
    the order given, the baseline last. For comparisons built in memory (the ab suite, the nightly
    baseline from the history, the perf suite's interleaved benchmark runs)."""
    order = [name for name in arms if name != baseline] + [baseline]
    return {"schema_version": SCHEMA_VERSION, "arm_order": order, "baseline_arm": baseline,
            "arms": {name: {"repeats": list(arms[name])} for name in order}}


def upgrade(document: dict[str, Any]) -> ResultsDocument:
    """A results document in the current shape (a copy when it changes).

    A version-1 file is relabelled version 2 and remembers `upgraded_from`. Arms are reshaped by
    what they hold, whatever the label says, so that a hand-built version-1 dict reads the same.
    """
    version = document.get("schema_version")
    arms = document.get("arms")
    reshaped = {name: _upgrade_arm(arm, document.get("seed")) for name, arm in arms.items()} if isinstance(arms, dict) else arms
    if reshaped == arms and not (isinstance(version, int) and version < SCHEMA_VERSION):
        return document  # type: ignore[return-value]
    upgraded: dict[str, Any] = {**document, "arms": reshaped} if isinstance(arms, dict) else dict(document)
    if isinstance(version, int) and version < SCHEMA_VERSION:
        upgraded.update(schema_version=SCHEMA_VERSION, upgraded_from=version)
    return upgraded  # type: ignore[return-value]


def _upgrade_arm(arm: Any, seed: int | None) -> Any:
    """Version 1's pytest-session arm (`cases`, `workloads` at arm level) as an arm of one repeat."""
    if not isinstance(arm, dict) or "repeats" in arm:
        return arm
    rest = {key: value for key, value in arm.items() if key not in ("cases", "workloads")}
    return {**rest, "repeats": [session_repeat(list(arm.get("cases") or []), dict(arm.get("workloads") or {}), seed)]}
