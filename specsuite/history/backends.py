"""Connections to the two history databases behind one small interface.

`open_backend(url)` picks the database from `--results-db`:

- nothing, a file path, or `sqlite:///relative.db` / `sqlite:////absolute.db`: SQLite (stdlib
  sqlite3) in WAL mode, so readers never block the writer, with a 30 s busy timeout;
- `postgresql://user@host:port/db` (or `postgres://`): PostgreSQL through psycopg, for a fleet of
  nodes writing to one store; connect and statement timeouts are always set.

Both backends take SQL with `?` placeholders and return rows as dicts.  Every database error
becomes a one-line `SpecsuiteError` naming the store (its password masked).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from specsuite.errors import SpecsuiteError
from specsuite.project_paths import RESULTS_DIR

DEFAULT_SQLITE_PATH = Path(RESULTS_DIR) / "history.sqlite"
SQLITE_BUSY_TIMEOUT_S = 30.0
POSTGRES_CONNECT_TIMEOUT_S = 10
POSTGRES_STATEMENT_TIMEOUT_MS = 60_000
# Serialises migrations when several nodes open a fresh PostgreSQL store at once.
MIGRATION_LOCK_ID = 0x5EC5_0117


class Backend(Protocol):
    dialect: str
    display_url: str

    def transaction(self) -> Any: ...
    def execute(self, sql: str, params: Sequence[Any] = ()) -> None: ...
    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]: ...
    def lock_for_migration(self) -> None: ...
    def close(self) -> None: ...


def mask_url(url: str) -> str:
    """The URL with any password replaced by ***, for messages and reports."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


class SqliteBackend:
    """A SQLite file; transactions take the write lock up front (BEGIN IMMEDIATE)."""

    dialect = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.display_url = f"sqlite:///{path}"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # isolation_level=None: no implicit transactions; `transaction()` is explicit.
            self._conn = sqlite3.connect(path, timeout=SQLITE_BUSY_TIMEOUT_S, isolation_level=None)
            self._conn.row_factory = sqlite3.Row
            mode = self._conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            self._conn.execute("PRAGMA foreign_keys=ON")
        except (OSError, sqlite3.Error) as exc:
            raise SpecsuiteError(f"cannot open results database {self.display_url}: {exc}") from None
        if mode.lower() != "wal":
            raise SpecsuiteError(f"results database {self.display_url} cannot use WAL mode (got {mode}); is it on a network filesystem?")

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self._run("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._run("COMMIT")

    def _run(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        try:
            return self._conn.execute(sql, tuple(params))
        except sqlite3.Error as exc:
            raise SpecsuiteError(f"results database {self.display_url}: {exc}") from None

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self._run(sql, params)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        return [dict(row) for row in self._run(sql, params).fetchall()]

    def lock_for_migration(self) -> None:
        """BEGIN IMMEDIATE already holds the database's write lock."""

    def close(self) -> None:
        self._conn.close()


class PostgresBackend:
    """A PostgreSQL database through psycopg 3; autocommit outside explicit transactions."""

    dialect = "postgres"

    def __init__(self, url: str) -> None:
        self.display_url = mask_url(url)
        try:
            import psycopg
            from psycopg.rows import dict_row
        except ImportError:
            raise SpecsuiteError("a postgresql:// results database needs psycopg: pip install 'specsuite[postgres]'") from None
        self._psycopg = psycopg
        try:
            self._conn = psycopg.connect(url, autocommit=True, row_factory=dict_row, connect_timeout=POSTGRES_CONNECT_TIMEOUT_S,
                                         options=f"-c statement_timeout={POSTGRES_STATEMENT_TIMEOUT_MS}")
        except psycopg.Error as exc:
            raise SpecsuiteError(f"cannot connect to results database {self.display_url}: {_one_line(exc)}") from None

    @contextmanager
    def transaction(self) -> Iterator[None]:
        try:
            with self._conn.transaction():
                yield
        except self._psycopg.Error as exc:
            raise SpecsuiteError(f"results database {self.display_url}: {_one_line(exc)}") from None

    def _run(self, sql: str, params: Sequence[Any]) -> Any:
        try:
            return self._conn.execute(sql.replace("?", "%s"), tuple(params))
        except self._psycopg.Error as exc:
            raise SpecsuiteError(f"results database {self.display_url}: {_one_line(exc)}") from None

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self._run(sql, params)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        return list(self._run(sql, params).fetchall())

    def lock_for_migration(self) -> None:
        self._run("SELECT pg_advisory_xact_lock(?)", (MIGRATION_LOCK_ID,))

    def close(self) -> None:
        self._conn.close()


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def sqlite_path(url: str) -> Path | None:
    """The file a SQLite URL or plain path names; None for a PostgreSQL URL."""
    scheme = urlsplit(url).scheme
    if scheme in ("postgresql", "postgres"):
        return None
    if url.startswith("sqlite:///"):
        return Path(url[len("sqlite:///"):])
    if scheme and len(scheme) > 1:  # one letter is a Windows drive, not a scheme
        raise SpecsuiteError(f"unsupported results database URL {mask_url(url)!r}: use a file path, sqlite:///FILE or postgresql://...")
    return Path(url)


def open_backend(url: str | None) -> Backend:
    """The backend for `--results-db` (default: the SQLite file specsuite-results/history.sqlite)."""
    if not url:
        return SqliteBackend(DEFAULT_SQLITE_PATH)
    path = sqlite_path(url)
    if path is None:
        return PostgresBackend(url)
    if not str(path) or path.is_dir():
        raise SpecsuiteError(f"results database {url!r} must name a file, not a folder")
    return SqliteBackend(path)
