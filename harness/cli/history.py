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
import os
from pathlib import Path
from typing import Any

from harness.errors import SpecsuiteError

RESULTS_DB_ENV = "SPECSUITE_RESULTS_DB"
EXIT_OK = 0
EXIT_REGRESSION = 1


def results_db_default() -> str | None:
    """`--results-db`'s default under both `specsuite history` and pytest: env SPECSUITE_RESULTS_DB."""
    return os.environ.get(RESULTS_DB_ENV) or None


def _add_db_option(parser: argparse.ArgumentParser, default: Any) -> None:
    parser.add_argument("--results-db", default=default, metavar="URL",
                        help=f"file path, sqlite:///FILE or postgresql://USER@HOST:PORT/DB (env {RESULTS_DB_ENV}; "
                             "neither given: specsuite-results/history.sqlite)")


def _add_render_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", metavar="DIR", help="folder for trends.json, regressions.json/.md and trend PNGs")
    parser.add_argument("--alpha", type=float, default=0.01, help="significance level of each step test (default 0.01)")
    parser.add_argument("--min-size", type=int, default=2, help="nights needed on each side of a step (default 2)")
    parser.add_argument("--metric", action="append", help="only this metric (repeatable)")
    _add_filters(parser, None)


def _add_filters(parser: argparse.ArgumentParser, default: Any) -> None:
    parser.add_argument("--arm", default=default, help="only runs of this arm")
    parser.add_argument("--accelerator", default=default, help="only runs on this accelerator")
    parser.add_argument("--config-key", default=default, help="only runs of this configuration fingerprint")
    parser.add_argument("--latest", type=int, default=default, metavar="N", help="only the newest N nights of each series")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register `specsuite history` and its verbs."""
    history = subparsers.add_parser("history", help="nightly results database: ingest runs, list them, render trends and regressions",
                                    description="Without a verb: render trends and the regression list (--out DIR).")
    _add_db_option(history, results_db_default())
    _add_render_options(history)
    verbs = history.add_subparsers(dest="history_verb", metavar="{ingest,list}")
    # Options repeated after a verb must not reset the parent's values: SUPPRESS leaves them alone.
    ingest = verbs.add_parser("ingest", help="store results.json files (one run per arm); storing the same file twice is a no-op")
    ingest.add_argument("results", nargs="+", metavar="RESULTS.json", help="results.json files or the run folders holding them")
    _add_db_option(ingest, argparse.SUPPRESS)
    ingest.add_argument("--arm", dest="ingest_arm", action="append", default=None, help="only this arm of each file (repeatable)")
    ingest.add_argument("--build-hash", default=os.environ.get("SPECSUITE_BUILD_HASH"), help="the server build (env SPECSUITE_BUILD_HASH)")
    ingest.add_argument("--accelerator", dest="ingest_accelerator", default=os.environ.get("SPECSUITE_ACCELERATOR"),
                        help="the accelerator, e.g. MI355X (env SPECSUITE_ACCELERATOR); part of the configuration fingerprint")
    ingest.add_argument("--outcome", choices=("passed", "failed", "unknown"), default=None,
                        help="whether the run's checks passed (default: from a `specsuite run` file's exit codes, else unknown); "
                             "only passed runs can be last-good")
    ingest.add_argument("--date", default=None, help="the run's date, YYYY-MM-DD[THH:MM:SSZ] (default: the file's created_utc)")
    ingest.add_argument("--node", default=None, help="the machine that ran the suites (default: this one)")
    listing = verbs.add_parser("list", help="list stored runs, oldest first")
    _add_db_option(listing, argparse.SUPPRESS)
    _add_filters(listing, argparse.SUPPRESS)


def command_ingest(args: argparse.Namespace) -> int:
    from harness.history import HistoryStore, items_from_file

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
    from harness.history import HistoryStore

    with HistoryStore.open(args.results_db) as store:
        runs = store.runs(arm=args.arm, accelerator=args.accelerator, config_key=args.config_key, latest=args.latest)
    print("| id | date | arm | build | server | outcome | accelerator | profile | config | results run |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for run in runs:
        print(f"| {run.id} | {run.started_utc} | {run.arm} | {run.build_hash or '-'} | {run.server_version or '-'} | {run.outcome} | "
              f"{run.accelerator or '-'} | {run.profile or '-'} | {run.config_key} | {run.results_run_id} |")
    return EXIT_OK


def _positive(value: int | None, option: str) -> None:
    if value is not None and value < 1:
        raise SpecsuiteError(f"{option} must be at least 1, got {value}")


def command_render(args: argparse.Namespace) -> int:
    from harness.history import HistoryStore, analyse
    from harness.history.metrics import METRIC_VERSIONS
    from harness.results.store import write_json_atomic
    from reports.trends import display_unit, format_effect, render_trends

    if not args.out:
        raise SpecsuiteError("specsuite history needs --out DIR to render trends (or a verb: ingest, list)")
    _positive(args.latest, "--latest")
    unknown = sorted(set(args.metric or []) - set(METRIC_VERSIONS))
    if unknown:
        raise SpecsuiteError(f"unknown metric {', '.join(unknown)}; expected one of {', '.join(METRIC_VERSIONS)}")
    with HistoryStore.open(args.results_db) as store:
        trends = analyse(store, arm=args.arm, accelerator=args.accelerator, config_key=args.config_key, latest=args.latest,
                         metrics=args.metric, alpha=args.alpha, min_size=args.min_size)
    if not trends["series"]:
        raise SpecsuiteError(f"no stored runs match in {trends['store']}; store some with `specsuite history ingest`")
    out = Path(args.out)
    render_trends(trends, out)
    write_json_atomic(out / "trends.json", trends)
    write_json_atomic(out / "regressions.json", {key: trends[key] for key in
                                                 ("generated_utc", "store", "filters", "alpha", "min_size", "test", "regressions",
                                                  "open_regressions", "steps")})
    nights = sum(series["nights"] for series in trends["series"])
    print(f"specsuite: {len(trends['series'])} series, {nights} nights, {len(trends['steps'])} steps, "
          f"{len(trends['regressions'])} regressions ({len(trends['open_regressions'])} open)")
    for step in trends["open_regressions"]:
        print(f"specsuite: open {step['kind']}: {step['label']} at {step['case_id']} from night {step['night']} "
              f"({step.get('label_at_step')}, {step['started_utc']}): {format_effect(step, display_unit(step['unit'])[0])}, "
              f"p_adj={step['p_adjusted']:.2g} [{step['series']}]")
    print(f"specsuite: wrote {out / 'regressions.md'}")
    return EXIT_REGRESSION if trends["open_regressions"] else EXIT_OK


def run(args: argparse.Namespace) -> int:
    """Dispatch `specsuite history [verb]`."""
    verb = getattr(args, "history_verb", None)
    if verb == "ingest":
        return command_ingest(args)
    if verb == "list":
        return command_list(args)
    return command_render(args)
