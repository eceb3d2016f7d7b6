"""`specsuite history`: store runs in the results database, list them, and render trends and regressions.

    specsuite history ingest RESULTS.json [...] --results-db URL [--build-hash H] [--accelerator A] [--outcome passed]
    specsuite history list --results-db URL [--arm NAME] [--latest 20]
    specsuite history --results-db URL --out DIR [--arm NAME] [--latest 30] [--alpha 0.01]

The database is `--results-db` (default: env SPECSUITE_RESULTS_DB, the same default as the
pytest option): a file path or sqlite:///FILE for SQLite, postgresql://... for PostgreSQL. With
neither given, this command uses the SQLite file specsuite-results/history.sqlite (a pytest
session with neither given stores nothing).

Rendering writes, under DIR: trends.json (every series, trend, segment and step), regressions.json
and regressions.md (the regression list), and trends/<series>/<metric>.png.

Exit codes: 0 done (render: no open regression); 1 render found an open regression (a step to a
worse level that the newest nights still show); 2 an error (bad input, unreachable database).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from specsuite.cli.exit_codes import EXIT_OK, EXIT_REGRESSION
from specsuite.errors import SpecsuiteError
from specsuite.session.option_table import RESULTS_DB_ENV as RESULTS_DB_ENV  # re-exported: the history's env var, for older imports
from specsuite.session.option_table import add_arguments
from specsuite.session.option_table import results_db_default as results_db_default

if TYPE_CHECKING:
    from specsuite.history.runs import RunRecord

# What regressions.json keeps of trends.json.
REGRESSIONS_KEYS = ("generated_utc", "store", "filters", "alpha", "min_size", "test", "regressions", "open_regressions", "steps")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register `specsuite history` and its verbs (options: specsuite/session/option_table.py)."""
    history = subparsers.add_parser("history", help="nightly results database: ingest runs, list them, render trends and regressions",
                                    description="Without a verb: render trends and the regression list (--out DIR).")
    add_arguments(history, "history")
    verbs = history.add_subparsers(dest="history_verb", metavar="{ingest,list}")
    # Options repeated after a verb must not reset the parent's values: inherited ones get no default there.
    ingest = verbs.add_parser("ingest", help="store results.json files (one run per arm); storing the same file twice is a no-op")
    add_arguments(ingest, "history ingest", inherited_from="history")
    listing = verbs.add_parser("list", help="list stored runs, oldest first")
    add_arguments(listing, "history list", inherited_from="history")


def command_ingest(args: argparse.Namespace) -> int:
    from specsuite.history import HistoryStore, items_from_file

    with HistoryStore.open(args.results_db) as store:
        for path in args.results:
            items = items_from_file(path, arms=args.ingest_arm, outcome=args.outcome, build_hash=args.build_hash,
                                    accelerator=args.ingest_accelerator, date=args.date, node=args.node)
            for item in items:
                stored = store.add(item)
                state = "stored as" if stored.created else "already stored as"
                print(f"specsuite: {item.run.run_key} ({item.run.outcome}, {len(item.metrics)} metrics, config {item.run.config_key}) "
                      f"{state} run {stored.id} in {store.url}")
    return EXIT_OK


def command_list(args: argparse.Namespace) -> int:
    from specsuite.history import HistoryStore

    with HistoryStore.open(args.results_db) as store:
        runs = store.runs(arm=args.arm, accelerator=args.accelerator, config_key=args.config_key, latest=args.latest)
        where = store.url
    if not runs:  # one line, not a table header over nothing
        print(f"specsuite: no stored runs match in {where}")
        return EXIT_OK
    print("| id | date | arm | build | server | outcome | accelerator | profile | config | results run |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for run in runs:
        print(f"| {run.id} | {run.started_utc} | {run.arm} | {run.build_hash or '-'} | {server_label(run)} | {run.outcome} | "
              f"{run.accelerator or '-'} | {run.profile or '-'} | {run.config_key} | {run.results_run_id} |")
    return EXIT_OK


def server_label(run: RunRecord) -> str:
    """The stored server's version, marked when the run measured the reference emulation (not a real SGLang)."""
    from specsuite.results.types import ArmIdentity

    version = run.server_version or "-"
    emulation = ArmIdentity.from_dict(run.identity or {}).is_reference()
    return f"{version} (reference emulation)" if emulation else version


def _positive(value: int | None, option: str) -> None:
    if value is not None and value < 1:
        raise SpecsuiteError(f"{option} must be at least 1, got {value}")


def command_render(args: argparse.Namespace) -> int:
    from specsuite.history import HistoryStore, analyse
    from specsuite.history.metrics import METRIC_VERSIONS
    from specsuite.reports.trends import display_unit, format_effect, render_trends
    from specsuite.results.store import write_json_atomic

    if not args.out:
        raise SpecsuiteError("specsuite history needs --out DIR to render trends (or a verb: ingest, list)")
    _positive(args.latest, "--latest")
    unknown = sorted(set(args.metric or []) - set(METRIC_VERSIONS))
    if unknown:
        raise SpecsuiteError(f"unknown metric {', '.join(unknown)}; expected one of {', '.join(METRIC_VERSIONS)}")
    with HistoryStore.open(args.results_db) as store:
        trends = analyse(store, arm=args.arm, accelerator=args.accelerator, config_key=args.config_key, latest=args.latest,
                         metrics=args.metric, alpha=args.alpha, min_size=args.min_size)
    if not trends.series:
        raise SpecsuiteError(f"no stored runs match in {trends.store}; store some with `specsuite history ingest`")
    out = Path(args.out)
    render_trends(trends, out)  # gives each series its figures' links, written into trends.json
    written = trends.to_dict()
    write_json_atomic(out / "trends.json", written)
    write_json_atomic(out / "regressions.json", {key: written[key] for key in REGRESSIONS_KEYS})
    nights = sum(series.nights for series in trends.series)
    print(f"specsuite: {len(trends.series)} series, {nights} nights, {len(trends.steps)} steps, "
          f"{len(trends.regressions)} regressions ({len(trends.open_regressions)} open)")
    for step in trends.open_regressions:
        print(f"specsuite: open {step.kind}: {step.label} at {step.case_id} from night {step.night} "
              f"({step.label_at_step}, {step.started_utc}): {format_effect(step, display_unit(step.unit)[0])}, "
              f"p_adj={step.p_adjusted:.2g} [{step.series}]")
    print(f"specsuite: wrote {out / 'regressions.md'}")
    return EXIT_REGRESSION if trends.open_regressions else EXIT_OK


def run(args: argparse.Namespace) -> int:
    """Dispatch `specsuite history [verb]`."""
    verb = getattr(args, "history_verb", None)
    if verb == "ingest":
        return command_ingest(args)
    if verb == "list":
        return command_list(args)
    return command_render(args)
