"""Ten simulated nights through the history: a regression from night 7 must be flagged there, and only there.

    .venv/bin/python tools/calibration/nightly_simulation.py                       # 10 nights, nofix from night 7
    .venv/bin/python tools/calibration/nightly_simulation.py --nights 10 --regress-from 7 --out /tmp/nightly-sim
    .venv/bin/python tools/calibration/nightly_simulation.py --postgres-url none   # SQLite only

Each night is a real pytest session, as a nightly job runs it: the correctness and nightly
regression suites (`-m "correctness or ab"`, T in {0, 1.0}, top_p 0.95, smoke profile) against a
freshly launched reference server, with `--results-db` (the plugin stores the night in SQLite),
`--compare-to last-good` and a JUnit file.  Nights 1 to 6 launch the fix arm, nights from
`--regress-from` on the nofix arm (the recycled-draft_probs bug: fallback ids, stray "!", acceptance up);
each night has its own seed, so healthy nights differ as real ones do.

Then the same results.json files are ingested into PostgreSQL (the URL from --postgres-url,
env SPECSUITE_TEST_POSTGRES_URL, or the URL file .ci/start-postgres wrote; a fresh database is created on that
server), trends are rendered from both stores, and the detected steps are printed.  Exit 0 when
both stores flag a practical step at `--regress-from` and nowhere else, and agree; 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from specsuite.history import HistoryStore, analyse, items_from_file  # noqa: E402
from specsuite.reports.trends import display_unit, format_effect, render_trends  # noqa: E402
from specsuite.server import refserver_contract  # noqa: E402
from specsuite.server.launcher import find_free_port  # noqa: E402

ACCELERATOR = "cpu-refserver"
ARM_NAME = "nightly"
SIM_DATABASE = "specsuite_nightly_sim"


def postgres_url(explicit: str | None) -> str | None:
    if explicit:
        return None if explicit == "none" else explicit
    if os.environ.get("SPECSUITE_TEST_POSTGRES_URL"):
        return os.environ["SPECSUITE_TEST_POSTGRES_URL"]
    url_file = Path(os.environ.get("SPECSUITE_PG_DIR") or Path(tempfile.gettempdir()) / "specsuite-postgres") / "postgres.url"
    return url_file.read_text().strip() if url_file.is_file() else None


def fresh_postgres_database(url: str) -> str:
    """Drop and create the simulation's database on the server `url` points at; return its URL."""
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {SIM_DATABASE}")
        conn.execute(f"CREATE DATABASE {SIM_DATABASE}")
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{SIM_DATABASE}", parts.query, parts.fragment))


def night_command(night: int, arm: str, out: Path, sqlite_url: str, temperatures: str, top_p: str) -> list[str]:
    port = find_free_port()
    launch = shlex.join(refserver_contract.server_command(arm, port=port))
    return [sys.executable, "-m", "pytest", "suites/", "-p", "specsuite.pytest_plugin.history", "-m", "correctness or ab", "-q", "-p", "no:cacheprovider",
            "--temperatures", temperatures, "--top-p", top_p, "--launch", launch, "--arm-name", ARM_NAME, "--specsuite-seed", str(night),
            "--results-dir", str(out / "results"), "--run-id", f"night-{night:02d}", "--results-db", sqlite_url,
            "--compare-to", "last-good", "--build-hash", build_hash(night, arm), "--accelerator", ACCELERATOR,
            "--junit-xml", str(out / "junit" / f"night-{night:02d}.xml")]


def build_hash(night: int, arm: str) -> str:
    return f"n{night:02d}-{arm}"


def run_nights(args: argparse.Namespace, out: Path, sqlite_url: str) -> list[dict[str, Any]]:
    nights = []
    for night in range(1, args.nights + 1):
        arm = "nofix" if night >= args.regress_from else "fix"
        log = out / "logs" / f"night-{night:02d}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        with open(log, "w", encoding="utf-8") as handle:
            code = subprocess.run(night_command(night, arm, out, sqlite_url, args.temperatures, args.top_p), cwd=REPO, stdout=handle,
                                  stderr=subprocess.STDOUT, timeout=600, check=False).returncode
        seconds = time.perf_counter() - started
        results = out / "results" / f"night-{night:02d}" / "results.json"
        stored = [line.strip() for line in log.read_text(encoding="utf-8").splitlines() if "specsuite: history" in line or "history not stored" in line]
        print(f"night {night:2d} [{arm:5s}] pytest exit {code} in {seconds:.0f} s; {stored[-1] if stored else 'not stored'}", flush=True)
        if code not in (0, 1) or not results.is_file():
            raise SystemExit(f"night {night} did not finish (exit {code}); see {log}")
        nights.append({"night": night, "arm": arm, "exit_code": code, "results": results, "seconds": seconds})
    return nights


def ingest_postgres(url: str, nights: list[dict[str, Any]]) -> None:
    with HistoryStore.open(url) as store:
        for entry in nights:
            for item in items_from_file(entry["results"], outcome="passed" if entry["exit_code"] == 0 else "failed",
                                        build_hash=build_hash(entry["night"], entry["arm"]), accelerator=ACCELERATOR):
                store.add(item)


def render(url: str, out: Path, label: str) -> dict[str, Any]:
    with HistoryStore.open(url) as store:
        typed = analyse(store, arm=ARM_NAME)
    render_trends(typed, out / label)
    trends = typed.to_dict()  # as trends.json holds it: the checks below read it so
    print(f"\n[{label}] {trends['store']}: {sum(s['nights'] for s in trends['series'])} nights in {len(trends['series'])} series, "
          f"{len(trends['steps'])} steps; trends in {out / label}")
    for step in typed.steps:
        scale, unit = display_unit(step.unit)
        print(f"  night {step.night:2d}  {step.kind:11s} {'practical' if step.practical else 'negligible':10s} "
              f"{step.label:38s} {step.case_id:15s} {format_effect(step, scale):22s} p_adj={step.p_adjusted:.2g}  [{unit}]")
    return trends


def verdict(trends: dict[str, Any], regress_from: int) -> list[str]:
    """Problems with the detection: missing at regress_from, or any step elsewhere."""
    problems = []
    at_step = [s for s in trends["steps"] if s["night"] == regress_from and s["practical"] and s["kind"] in ("regression", "change")]
    if not at_step:
        problems.append(f"no practical regression flagged at night {regress_from}")
    problems += [f"false alarm: {s['label']} {s['case_id']} at night {s['night']}" for s in trends["steps"] if s["night"] != regress_from]
    return problems


def step_signature(trends: dict[str, Any]) -> list[tuple[str, str, int, str]]:
    return sorted((s["metric"], s["case_id"], s["night"], s["kind"]) for s in trends["steps"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nights", type=int, default=10)
    parser.add_argument("--regress-from", type=int, default=7, help="first night on the nofix arm (default 7)")
    parser.add_argument("--out", default="/tmp/specsuite-nightly-sim", help="working folder (emptied first)")
    parser.add_argument("--postgres-url", default=None, help="a PostgreSQL server URL, or 'none' (default: env or .ci/start-postgres's URL file)")
    parser.add_argument("--temperatures", default="0,1.0")
    parser.add_argument("--top-p", default="0.95")
    args = parser.parse_args()
    if not 2 <= args.regress_from <= args.nights:
        parser.error("--regress-from must lie between 2 and --nights")
    out = Path(args.out)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    sqlite_url = f"sqlite:///{out / 'history.sqlite'}"

    nights = run_nights(args, out, sqlite_url)
    stores = {"sqlite": sqlite_url}
    pg = postgres_url(args.postgres_url)
    if pg:
        stores["postgres"] = fresh_postgres_database(pg)
        ingest_postgres(stores["postgres"], nights)
    else:
        print("PostgreSQL: no server URL (env SPECSUITE_TEST_POSTGRES_URL, .ci/start-postgres's URL file, or --postgres-url); SQLite only")

    analyses = {label: render(url, out, label) for label, url in stores.items()}
    problems = [f"[{label}] {line}" for label, trends in analyses.items() for line in verdict(trends, args.regress_from)]
    signatures = {label: step_signature(trends) for label, trends in analyses.items()}
    if len({tuple(s) for s in signatures.values()}) > 1:
        problems.append(f"the stores disagree: {signatures}")
    summary = ", ".join(f"{n['night']}:{n['arm']}/exit {n['exit_code']}" for n in nights)
    print(f"\nnights: {summary}")
    print(f"mean night {sum(n['seconds'] for n in nights) / len(nights):.0f} s")
    if problems:
        print("FAIL: " + "; ".join(problems))
        return 1
    print(f"OK: steps flagged at night {args.regress_from} only, in {' and '.join(stores)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
