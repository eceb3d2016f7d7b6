"""Turn a results.json into history rows: one run per arm, with its metrics and its document.

Two shapes are read (specsuite/results/store.py documents both):

- a pytest session's file, `arms.<arm>.{identity, cases, workloads}`: one repeat per arm;
- a `specsuite run` file, `arms.<arm>.{identity, repeats: [{repeat, exit_code, cases, workloads}]}`.

Both are loaded as the typed document (specsuite.results.store.load_results upgrades the first), and each
arm's repeats are kept as an `Arm` of repeats (`{"repeats": [...]}` in the database), what
specsuite.analysis.metrics reads and the store keeps for exact re-comparison (`--compare-to`).  Only finished runs are stored: a file
whose status is "running", "interrupted" or "failed" is refused with the reason.

The outcome (did the run's checks pass?) decides which runs may serve as `last-good`.  A session
file does not record it, so the caller passes it (the pytest plugin knows its exit status);
a `specsuite run` file gives it through its sessions' exit codes and its `fail_on` outcome.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specsuite.errors import SpecsuiteError
from specsuite.history.metrics import MetricRecord, extract_metrics
from specsuite.history.runs import OUTCOMES, Outcome, RunRecord, config_from_identity, config_key
from specsuite.results.store import load_results
from specsuite.results.types import Arm, ArmIdentity, Document, FailOnVerdict, Repeat

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2})?Z?)?$")
_SESSION_KEYS = ("repeat", "seed", "exit_code", "cases", "workloads", "session_status")


@dataclass
class IngestItem:
    """One arm ready to store: its run row, its repeats as the history keeps them (an `Arm` of repeats), its metrics."""

    run: RunRecord
    document: Arm
    metrics: list[MetricRecord]


def normalise_date(text: str) -> str:
    """`YYYY-MM-DD` or `YYYY-MM-DDTHH:MM[:SS][Z]` as `YYYY-MM-DDTHH:MM:SSZ` (UTC)."""
    if not _DATE.match(text):
        raise SpecsuiteError(f"date {text!r} must be YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ (UTC)")
    day, _, clock = text.rstrip("Z").partition("T")
    clock = clock or "00:00:00"
    if clock.count(":") == 1:
        clock += ":00"
    return f"{day}T{clock}Z"


def arm_document(arm: Arm) -> Arm:
    """The arm's repeats as the history stores them, without per-session paths (each repeat's keys in their written order)."""
    return Arm.written(repeats=[Repeat.from_dict({key: value for key, value in repeat.to_dict().items() if key in _SESSION_KEYS})
                                for repeat in arm.repeats])


def derived_outcome(results: Document, document: Arm) -> Outcome:
    """passed / failed from a `specsuite run` file's exit codes and fail-on rules; unknown otherwise."""
    codes = [repeat.exit_code for repeat in document.repeats]
    if not codes or any(code is None for code in codes):
        return "unknown"
    if any(code != 0 for code in codes) or FailOnVerdict.from_dict(results.fail_on or {}).failed:
        return "failed"
    return "passed"


def items_from_results(
    results: Document,
    *,
    source_path: str | None = None,
    arms: list[str] | None = None,
    outcome: Outcome | None = None,
    build_hash: str | None = None,
    accelerator: str | None = None,
    date: str | None = None,
    node: str | None = None,
) -> list[IngestItem]:
    """One `IngestItem` per arm of a loaded results document (all arms, or those named), in the current shape
    (`load_results`, or specsuite.results.model.upgraded_document for a parsed dict)."""
    where = source_path or results.run_id
    status = results.status
    if status != "complete":
        raise SpecsuiteError(f"results {where} have status {status!r}; only complete runs go into the history")
    if outcome is not None and outcome not in OUTCOMES:
        raise SpecsuiteError(f"outcome {outcome!r} must be one of {', '.join(OUTCOMES)}")
    names = arms or list(results.arms)
    missing = [name for name in names if name not in results.arms]
    if missing:
        raise SpecsuiteError(f"results {where} have no arm {', '.join(missing)}; arms: {', '.join(results.arms) or 'none'}")
    started = normalise_date(date) if date else results.created_utc
    if not started:
        raise SpecsuiteError(f"results {where} have no created_utc; pass a date")
    items = []
    for name in names:
        identity = results.arms[name].identity or {}
        if not identity:
            raise SpecsuiteError(f"arm {name!r} of {where} has no server identity; it cannot be placed in a trend")
        typed_identity = ArmIdentity.from_dict(identity)
        document = arm_document(results.arms[name])
        config = config_from_identity(typed_identity, profile=results.profile, accelerator=accelerator)
        # The file's own creation time keeps nights apart even when every night reuses one --run-id.
        run_key = f"{results.run_id}/{name}@{results.created_utc or started}"
        run = RunRecord(
            run_key=run_key, results_run_id=str(results.run_id), arm=name, started_utc=started,
            outcome=outcome or derived_outcome(results, document), results_status=status, profile=results.profile,
            seed=results.seed, repeats=len(document.repeats), config_key=config_key(config), config=config,
            model=typed_identity.served_model_name or typed_identity.model_path, server_version=typed_identity.version,
            server_url=typed_identity.base_url, build_hash=build_hash, accelerator=accelerator, node=node or socket.gethostname(),
            specsuite_version=results.specsuite_version, results_schema_version=results.schema_version,
            source_path=source_path, identity=identity,
        )
        items.append(IngestItem(run, document, extract_metrics(document, f"run:{run_key}")))
    return items


def items_from_file(path: str | Path, **labels: Any) -> list[IngestItem]:
    """Load a results.json (or its run folder) and build its items; see `items_from_results`."""
    target = Path(path)
    results = load_results(target)
    resolved = target / "results.json" if target.is_dir() else target
    return items_from_results(results, source_path=str(resolved.resolve()), **labels)
