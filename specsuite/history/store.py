"""`HistoryStore`: runs and metrics in SQLite or PostgreSQL, behind one interface.

    store = HistoryStore.open("postgresql://specsuite@db/specsuite")   # or a path, or None
    stored = store.add(item)                 # an IngestItem; the same run twice is stored once
    runs = store.runs(config_key=..., arm=...)
    metrics = store.metrics_by_run([run.id for run in runs])
    baseline = store.last_good(config_key, arm)

Opening applies missing schema migrations (specsuite.history.schema) and refuses a database from
a newer specsuite.  Each `add` is one transaction: a run and all its metrics, or nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Sequence

import orjson

from specsuite.errors import SpecsuiteError
from specsuite.history.backends import Backend, open_backend
from specsuite.history.ingest import IngestItem
from specsuite.history.metrics import MetricRecord
from specsuite.history.runs import RunRecord
from specsuite.history.schema import MIGRATIONS, MIGRATIONS_TABLE, SCHEMA_VERSION
from specsuite.results.types import Arm

_RUN_COLUMNS = ("run_key", "results_run_id", "arm", "started_utc", "ingested_utc", "outcome", "results_status", "profile", "seed",
                "repeats", "config_key", "config_json", "model", "server_version", "server_url", "build_hash", "accelerator", "node",
                "specsuite_version", "results_schema_version", "source_path", "identity_json", "document_json")
_LISTED_RUN_COLUMNS = ("id", *(c for c in _RUN_COLUMNS if c != "document_json"))
_METRIC_COLUMNS = ("run_id", "name", "case_id", "temperature", "top_p", "version", "unit", "direction", "value", "ci_low", "ci_high",
                   "k", "n", "repeats", "samples_json", "samples_ref", "note")


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY).decode()


@dataclass(frozen=True)
class StoredRun:
    """What `add` did: the run's id, and whether it was new (False: it was already stored)."""

    id: int
    created: bool


def migrate(backend: Backend) -> int:
    """Apply every migration the database lacks; return the schema version it now has."""
    with backend.transaction():
        backend.lock_for_migration()
        backend.execute(MIGRATIONS_TABLE)
        applied = {row["version"] for row in backend.query("SELECT version FROM schema_migrations")}  # a database row
        newest = max(applied, default=0)
        if newest > SCHEMA_VERSION:
            raise SpecsuiteError(f"results database {backend.display_url} has schema version {newest}, newer than this "
                                 f"specsuite's {SCHEMA_VERSION}; upgrade specsuite to use it")
        for migration in MIGRATIONS:
            if migration.version in applied:
                continue
            for statement in migration.sql(backend.dialect):
                backend.execute(statement)
            backend.execute("INSERT INTO schema_migrations (version, description, applied_utc) VALUES (?, ?, ?)",
                            (migration.version, migration.description, _now()))
    return SCHEMA_VERSION


class HistoryStore:
    """The nightly history: add runs, list them, read their metrics and documents."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.schema_version = migrate(backend)

    @classmethod
    def open(cls, url: str | None) -> HistoryStore:
        backend = open_backend(url)
        try:
            return cls(backend)
        except BaseException:
            backend.close()
            raise

    @property
    def url(self) -> str:
        return self.backend.display_url

    def close(self) -> None:
        self.backend.close()

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ writing

    def add(self, item: IngestItem) -> StoredRun:
        """Store a run and its metrics in one transaction; a run already stored (same run_key) is left as is."""
        run = item.run
        values = {
            **{name: getattr(run, name) for name in _RUN_COLUMNS if hasattr(run, name)},
            "ingested_utc": _now(),
            "config_json": _json(run.config),
            "identity_json": _json(run.identity),
            "document_json": _json(item.document.to_dict()),
        }
        columns = ", ".join(_RUN_COLUMNS)
        marks = ", ".join("?" for _ in _RUN_COLUMNS)
        with self.backend.transaction():
            inserted = self.backend.query(
                f"INSERT INTO runs ({columns}) VALUES ({marks}) ON CONFLICT (run_key) DO NOTHING RETURNING id",
                [values[name] for name in _RUN_COLUMNS])
            if not inserted:
                existing = self.backend.query("SELECT id FROM runs WHERE run_key = ?", (run.run_key,))
                return StoredRun(int(existing[0]["id"]), created=False)  # database rows, by column
            run_id = int(inserted[0]["id"])
            metric_marks = ", ".join("?" for _ in _METRIC_COLUMNS)
            for metric in item.metrics:
                self.backend.execute(f"INSERT INTO metrics ({', '.join(_METRIC_COLUMNS)}) VALUES ({metric_marks})",
                                     _metric_values(run_id, metric))
        return StoredRun(run_id, created=True)

    # ------------------------------------------------------------------ reading

    def runs(
        self,
        *,
        config_key: str | None = None,
        arm: str | None = None,
        accelerator: str | None = None,
        outcome: str | None = None,
        since: str | None = None,
        latest: int | None = None,
    ) -> list[RunRecord]:
        """Runs matching every given filter, oldest first; `latest` keeps only the newest N."""
        where, params = [], []
        for column, value in (("config_key", config_key), ("arm", arm), ("accelerator", accelerator), ("outcome", outcome)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if since is not None:
            where.append("started_utc >= ?")
            params.append(since)
        sql = f"SELECT {', '.join(_LISTED_RUN_COLUMNS)} FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY started_utc DESC, id DESC"
        if latest is not None:
            sql += " LIMIT ?"
            params.append(int(latest))
        return [_run_from_row(row) for row in reversed(self.backend.query(sql, params))]

    def run(self, run_id: int) -> RunRecord:
        rows = self.backend.query(f"SELECT {', '.join(_LISTED_RUN_COLUMNS)} FROM runs WHERE id = ?", (int(run_id),))
        if not rows:
            raise SpecsuiteError(f"results database {self.url} has no run {run_id}")
        return _run_from_row(rows[0])

    def document(self, run_id: int) -> Arm:
        """The run's stored arm document: its repeats (`{"repeats": [...]}` in the database)."""
        rows = self.backend.query("SELECT document_json FROM runs WHERE id = ?", (int(run_id),))
        if not rows:
            raise SpecsuiteError(f"results database {self.url} has no run {run_id}")
        return Arm.from_dict(orjson.loads(rows[0]["document_json"]))  # a database JSON column, typed here

    def metrics_by_run(self, run_ids: Sequence[int]) -> dict[int, list[MetricRecord]]:
        """{run id: its metric records}, for every run id given (empty lists for runs without metrics)."""
        ids = [int(i) for i in run_ids]
        found: dict[int, list[MetricRecord]] = {i: [] for i in ids}
        for start in range(0, len(ids), 500):  # bounded IN lists
            chunk = ids[start:start + 500]
            if not chunk:
                continue
            rows = self.backend.query(
                f"SELECT {', '.join(_METRIC_COLUMNS)} FROM metrics WHERE run_id IN ({', '.join('?' for _ in chunk)}) ORDER BY run_id, name, case_id",
                chunk)
            for row in rows:
                found[int(row["run_id"])].append(_metric_from_row(row))  # a database row, by column
        return found

    def last_good(self, config_key: str, arm: str) -> RunRecord | None:
        """The newest passed run of this configuration and arm."""
        rows = self.backend.query(f"SELECT {', '.join(_LISTED_RUN_COLUMNS)} FROM runs WHERE config_key = ? AND arm = ? "
                                  "AND outcome = 'passed' ORDER BY started_utc DESC, id DESC LIMIT 1", (config_key, arm))
        return _run_from_row(rows[0]) if rows else None


def _metric_values(run_id: int, metric: MetricRecord) -> list[Any]:
    data = metric.to_dict()
    data.update(run_id=run_id, samples_json=_json(metric.samples))
    return [data[name] for name in _METRIC_COLUMNS]


_METRIC_FIELD_COLUMNS = tuple(column for column in _METRIC_COLUMNS if column not in ("run_id", "samples_json"))
_JSON_RUN_COLUMNS = ("config_json", "identity_json")
_INTEGER_RUN_COLUMNS = ("id", "seed", "repeats", "results_schema_version")


def _metric_from_row(row: dict[str, Any]) -> MetricRecord:
    """A metrics row as its record: the columns named as the record's fields, the samples parsed from their JSON column."""
    named = {column: row[column] for column in _METRIC_FIELD_COLUMNS}
    named.update({column: int(named[column]) for column in ("repeats", "version")})
    return MetricRecord(**named, samples=orjson.loads(row["samples_json"]))  # a database JSON column


def _run_from_row(row: dict[str, Any]) -> RunRecord:
    """A runs row as its record: the columns named as the record's fields, the config and identity parsed from JSON."""
    named = {column: row[column] for column in _LISTED_RUN_COLUMNS if column not in _JSON_RUN_COLUMNS}
    named.update({column: int(named[column]) for column in _INTEGER_RUN_COLUMNS if named[column] is not None})
    config, identity = (orjson.loads(row[column]) for column in _JSON_RUN_COLUMNS)
    return RunRecord(config=config, identity=identity, **named)
