"""The history store on a real PostgreSQL server: the same runs, metrics, baselines and steps as on
SQLite, several nodes writing at once, and migrations racing on a fresh database.

The server comes from env SPECSUITE_TEST_POSTGRES_URL (.ci/run starts one with .ci/start-postgres and exports its
URL), else this module starts a cluster of its own with `.ci/start-postgres --no-install` when Debian's server
binaries are present, in a temporary folder (its data and its URL file; nothing in the checkout), and stops it and
removes the folder when the module ends.  Without any of these every test skips, saying why.
Each run of the module works in a database of its own, dropped at the end.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import pytest

from specsuite.errors import SpecsuiteError
from specsuite.history import HistoryStore, analyse, items_from_results
from specsuite.history.schema import SCHEMA_VERSION
from specsuite.results.model import upgraded_document
from tests.helpers.ab_results import CASES, make_case

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed: pip install 'specsuite[postgres]'")

REPO = Path(__file__).resolve().parents[2]
URL_ENV = "SPECSUITE_TEST_POSTGRES_URL"
START_SCRIPT = REPO / ".ci" / "start-postgres"
START_TIMEOUT_S = 120  # the script's own budget is 110 s
IDENTITY = {"base_url": "http://node:30000", "model_path": "/models/m", "version": "0.5.23", "tokenizer_length": 8100, "vocab_size": 8128,
            "cuda_graph": "on", "speculative": {"speculative_algorithm": "EAGLE", "speculative_num_draft_tokens": 6}, "server_args": {}}


def _answers(url: str) -> str | None:
    """None when the server answers; else why not."""
    try:
        with psycopg.connect(url, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
        return None
    except psycopg.Error as exc:
        return " ".join(str(exc).split())


def start_own_cluster(state_dir: Path) -> str:
    """Start a cluster in `state_dir` (which must not exist: the script makes it, owned by the server's account);
    its URL, or pytest.skip with the reason none could start."""
    has_binaries = any(Path("/usr/lib/postgresql").glob("*/bin/initdb")) or shutil.which("initdb")
    if not has_binaries:
        pytest.skip(f"no PostgreSQL: set {URL_ENV}, run .ci/start-postgres, or install Debian's postgresql")
    env = {**os.environ, "SPECSUITE_PG_DIR": str(state_dir)}
    started = subprocess.run([str(START_SCRIPT), "--no-install"], capture_output=True, text=True, timeout=START_TIMEOUT_S, check=False, env=env)
    if started.returncode != 0 or not started.stdout.strip():
        pytest.skip(f"PostgreSQL binaries are here but no server could start: {started.stderr.strip() or started.returncode}")
    return started.stdout.strip().splitlines()[-1]


def stop_own_cluster(state_dir: Path) -> None:
    env = {**os.environ, "SPECSUITE_PG_DIR": str(state_dir)}
    subprocess.run([str(START_SCRIPT), "--stop"], capture_output=True, text=True, timeout=START_TIMEOUT_S, check=False, env=env)
    shutil.rmtree(state_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    """The environment's server, else a cluster of this module's own, stopped (and its folder removed) at the end."""
    if os.environ.get(URL_ENV):
        url = os.environ[URL_ENV]
        problem = _answers(url)
        if problem:
            pytest.skip(f"{URL_ENV} is set but the server does not answer: {problem}")
        yield url
        return
    # Not under tmp_path: pytest's base folder is private to this user, and the server runs as its own account.
    state_dir = Path(tempfile.gettempdir()) / f"specsuite-postgres-test-{uuid.uuid4().hex[:12]}"
    try:
        yield start_own_cluster(state_dir)
    finally:
        stop_own_cluster(state_dir)


@pytest.fixture(scope="module")
def database(server_url):
    """A database of this module's own on the server; returns a function giving fresh ones too."""
    created: list[str] = []
    parts = urlsplit(server_url)

    def fresh() -> str:
        name = f"specsuite_test_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(server_url, autocommit=True, connect_timeout=10) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        created.append(name)
        return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))

    yield fresh
    with psycopg.connect(server_url, autocommit=True, connect_timeout=10) as conn:
        for name in created:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def night(number: int, *, invalid_rate: float = 0.0, accept_mean: float = 2.4, run_id: str | None = None) -> dict:
    rng = np.random.default_rng(number)
    cases = [make_case(rng, t, p, invalid_rate=invalid_rate, accept_mean=accept_mean if t > 0 else 2.4) for t, p in CASES]
    return {"schema_version": 1, "created_utc": f"2025-03-{number:02d}T02:00:00Z", "run_id": run_id or f"night-{number:02d}",
            "status": "complete", "seed": number, "profile": "smoke",
            "arms": {"nightly": {"identity": IDENTITY, "cases": cases, "workloads": {}}}}


def add_night(store: HistoryStore, results: dict, outcome: str = "passed") -> int:
    [item] = items_from_results(upgraded_document(results), outcome=outcome, build_hash=f"b{results['seed']}", accelerator="MI355X")
    return store.add(item).id


def test_round_trip_and_idempotence(database):
    url = database()
    with HistoryStore.open(url) as store:
        results = night(1)
        first = add_night(store, results)
        assert add_night(store, results) == first
        [run] = store.runs()
        assert (run.id, run.build_hash, run.accelerator, run.outcome) == (first, "b1", "MI355X", "passed")
        metrics = store.metrics_by_run([first])[first]
        assert {m.name for m in metrics} >= {"invalid_ids", "stray_per_1200", "accept_length"}
        assert store.document(first).to_dict()["repeats"][0]["cases"] == results["arms"]["nightly"]["cases"]
        assert store.last_good(run.config_key, "nightly").id == first
        version = store.backend.query("SELECT max(version) AS v FROM schema_migrations")[0]["v"]
        assert version == SCHEMA_VERSION


def test_ten_nights_give_the_same_steps_as_sqlite(database, tmp_path):
    nights = [night(n, invalid_rate=0.015 if n >= 7 else 0.0, accept_mean=4.2 if n >= 7 else 2.4) for n in range(1, 11)]
    found = {}
    for label, url in (("postgres", database()), ("sqlite", str(tmp_path / "h.sqlite"))):
        with HistoryStore.open(url) as store:
            for results in nights:
                add_night(store, results, "failed" if results["seed"] >= 7 else "passed")
            trends = analyse(store)
        found[label] = sorted((s.metric, s.case_id, s.night, round(s.p_adjusted, 12)) for s in trends.steps)
    assert found["postgres"] == found["sqlite"]
    assert {night for _, _, night, _ in found["postgres"]} == {7}


def test_nodes_writing_at_once(database):
    """Four nodes store three nights each, concurrently, through their own connections."""
    url = database()
    HistoryStore.open(url).close()
    errors: list[BaseException] = []

    def node(index: int) -> None:
        try:
            with HistoryStore.open(url) as store:
                for n in range(3):
                    add_night(store, night(1 + n, run_id=f"node{index}-night{n}"))
        except BaseException as exc:  # reported below; a thread cannot fail the test itself
            errors.append(exc)

    threads = [threading.Thread(target=node, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    with HistoryStore.open(url) as store:
        runs = store.runs()
        assert len(runs) == 12 and len({r.run_key for r in runs}) == 12
        assert all(store.metrics_by_run([r.id for r in runs]).values())


def test_migrations_racing_on_a_fresh_database(database):
    url = database()
    errors: list[BaseException] = []

    def open_store() -> None:
        try:
            HistoryStore.open(url).close()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_store) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    with psycopg.connect(url, connect_timeout=10) as conn:
        assert conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0] == SCHEMA_VERSION


def test_newer_schema_is_refused(database):
    url = database()
    HistoryStore.open(url).close()
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        conn.execute("INSERT INTO schema_migrations VALUES (%s, 'future', '2030-01-01T00:00:00Z')", (SCHEMA_VERSION + 1,))
    with pytest.raises(SpecsuiteError, match="newer than this specsuite"):
        HistoryStore.open(url)


def test_connection_errors_are_one_line_without_the_password(server_url):
    parts = urlsplit(server_url)
    wrong_user = urlunsplit((parts.scheme, f"nobody_here:hunter2secret@{parts.hostname}:{parts.port}", parts.path, "", ""))
    with pytest.raises(SpecsuiteError) as excinfo:
        HistoryStore.open(wrong_user)
    message = str(excinfo.value)
    assert "hunter2secret" not in message and "nobody_here:***@" in message and "\n" not in message
