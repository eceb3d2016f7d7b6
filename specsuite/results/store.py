"""Results files written as they arrive, so a crash or Ctrl-C loses nothing already measured.

Layout of one run::

    <results_dir>/<run_id>/results.json                 summary, rewritten atomically
    <results_dir>/<run_id>/arms/<arm>/requests.jsonl    one JSON object per request, appended

``run_id`` is the UTC start time plus a short suffix, e.g. ``20250101T120000Z-3f9a1c``.

``results.json`` (its shape is specsuite.results.model, typed in specsuite.results.types,
``SCHEMA_VERSION`` 3; specsuite.results.builder lays out the content, this module owns versioning,
atomic writes and loading) always starts with
``schema_version, created_utc, specsuite_version, run_id, status``. Every writer (a pytest
session, ``specsuite run``, ``specsuite gsm8k``) keeps each arm's sessions under
``arms.<arm>.repeats[]``, each repeat with its ``repeat``, ``cases`` and ``workloads`` (filled in
on write); ``load_results`` upgrades a version-1 or version-2 file to that shape and returns it
typed (a `Document`).

``server_under_test`` (added without a version bump: readers that ignore it are unaffected)
says how the server was chosen (``source``: server-url, launch, embedded-reference) and whether
it is specsuite's reference emulation (see specsuite.server.session). ``status`` is one of ``STATUSES``; an interrupted run also has ``stopped_at`` (where it
stopped) and a failed one ``error``. ``schema_version`` is an int, bumped on any change that
breaks readers; ``load_results`` refuses files newer than it understands.

JSON is written with orjson: numpy scalars and arrays become plain numbers and lists, and
NaN or infinity become ``null`` (JSON has no spelling for them). Everything written is passed
through ``specsuite.server.secrets.redact`` first.
"""

from __future__ import annotations

import importlib.metadata
import os
import random
import re
import tempfile
import threading
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType
from typing import Any

import orjson

from specsuite.errors import SpecsuiteError
from specsuite.results.model import SCHEMA_VERSION, complete_arms, upgraded_document
from specsuite.results.types import Document
from specsuite.server.secrets import redact

STATUSES = ("running", "complete", "interrupted", "failed")
RESULTS_FILE = "results.json"
UNKNOWN_VERSION = "0+unknown"

_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_RESERVED_KEYS = ("schema_version", "created_utc", "specsuite_version", "run_id", "status")


def specsuite_version() -> str:
    """The installed specsuite version, or ``0+unknown`` when running from a bare checkout."""
    try:
        return importlib.metadata.version("specsuite")
    except importlib.metadata.PackageNotFoundError:
        return UNKNOWN_VERSION


def _json_default(obj: Any) -> Any:
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=repr)
    # numpy arrays orjson cannot take natively (non-contiguous, odd dtypes) and numpy scalars.
    if hasattr(obj, "tolist"):
        return obj.tolist()
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def _dumps(data: Any, *, indent: bool, where: Path) -> bytes:
    option = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
    if indent:
        option |= orjson.OPT_INDENT_2
    try:
        return orjson.dumps(data, default=_json_default, option=option)
    except TypeError as exc:
        raise SpecsuiteError(f"cannot write {where}: {exc}") from None


def _check_name(kind: str, name: str) -> str:
    if not isinstance(name, str) or not _SAFE_NAME.fullmatch(name):
        raise SpecsuiteError(f"invalid {kind} {name!r}: use letters, digits, '.', '_' and '-' only")
    return name


class RecordWriter:
    """Appends one JSON object per line to ``path``, flushed after every record.

    Thread-safe: workload runners call ``write`` from worker threads. ``fsync=True`` also
    forces each record to disk; it is off by default because flushing already survives a
    crash of this process and fsync costs milliseconds per record (it only matters if the
    machine itself goes down).
    """

    def __init__(self, path: str | os.PathLike[str], *, secrets: Iterable[str | None] = (), fsync: bool = False) -> None:
        self.path = Path(path)
        self._secrets = list(secrets)
        self._fsync = fsync
        self._lock = threading.Lock()
        self.count = 0
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "ab")
        except OSError as exc:
            raise SpecsuiteError(f"cannot open record file {self.path}: {exc.strerror}") from None

    def write(self, record: Mapping[str, Any]) -> None:
        """Redact, serialise and append ``record`` as one line, then flush."""
        if not isinstance(record, Mapping):
            raise SpecsuiteError(f"a record for {self.path} must be a mapping, got {type(record).__name__}")
        line = _dumps(redact(dict(record), self._secrets), indent=False, where=self.path) + b"\n"
        with self._lock:
            if self._file.closed:
                raise SpecsuiteError(f"record file {self.path} is already closed")
            try:
                self._file.write(line)
                self._file.flush()
                if self._fsync:
                    os.fsync(self._file.fileno())
            except OSError as exc:
                raise SpecsuiteError(f"cannot write to record file {self.path}: {exc.strerror}") from None
            self.count += 1

    @property
    def closed(self) -> bool:
        return self._file.closed

    def close(self) -> None:
        with self._lock:
            self._file.close()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def _umask() -> int:
    """The process's umask (read by setting it and putting it back: there is no other portable way)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_json_atomic(path: str | os.PathLike[str], data: Any, *, secrets: Iterable[str | None] = ()) -> Path:
    """Write ``data`` (redacted) as indented JSON so that readers see the old or the new file, never half.

    The text goes to a temporary file in the same folder, is fsynced, then renamed over ``path``.
    """
    target = Path(path)
    payload = _dumps(redact(data, secrets), indent=True, where=target) + b"\n"
    temp_name = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp", delete=False) as handle:
            temp_name = handle.name
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        # NamedTemporaryFile creates 0600; the file gets the mode every other file of the run has (0666 less the umask).
        os.chmod(temp_name, 0o666 & ~_umask())
        os.replace(temp_name, target)
        temp_name = None
    except OSError as exc:
        raise SpecsuiteError(f"cannot write {target}: {exc.strerror}") from None
    finally:
        if temp_name is not None:
            Path(temp_name).unlink(missing_ok=True)
    _fsync_directory(target.parent)
    return target


def _fsync_directory(folder: Path) -> None:
    # Makes the rename itself durable; not possible on every platform, and harmless to skip.
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class RunDirectory:
    """The folder of one run: ``results.json`` plus per-arm record files.

    ``seed`` makes the run-id suffix reproducible; without it the suffix is random. An explicit
    ``run_id`` that already exists is refused, so a run never overwrites another.
    """

    def __init__(
        self,
        results_dir: str | os.PathLike[str],
        *,
        run_id: str | None = None,
        seed: int | None = None,
        secrets: Iterable[str | None] = (),
        now: datetime | None = None,
    ) -> None:
        started = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
        self.created_utc = started.strftime("%Y-%m-%dT%H:%M:%SZ")
        self._secrets = list(secrets)
        self._writers: dict[Path, RecordWriter] = {}
        self._last: dict[str, Any] = {}
        root = Path(results_dir)
        if run_id is not None:
            self.run_id = _check_name("run id", run_id)
            self.path = self._create(root / run_id)
            if self.path is None:
                raise SpecsuiteError(f"results folder {root / run_id} already exists; choose another run id")
            return
        suffixes = random.Random(seed) if seed is not None else None
        for _ in range(20):
            suffix = f"{suffixes.getrandbits(24):06x}" if suffixes else os.urandom(3).hex()
            candidate = f"{started.strftime('%Y%m%dT%H%M%SZ')}-{suffix}"
            created = self._create(root / candidate)
            if created is not None:
                self.run_id, self.path = candidate, created
                return
        raise SpecsuiteError(f"cannot find a free run id under {root}")

    @staticmethod
    def _create(folder: Path) -> Path | None:
        try:
            folder.mkdir(parents=True, exist_ok=False)
        except FileExistsError:
            return None
        except OSError as exc:
            raise SpecsuiteError(f"cannot create results folder {folder}: {exc.strerror}") from None
        return folder

    @property
    def results_path(self) -> Path:
        return self.path / RESULTS_FILE

    def arm_dir(self, arm: str) -> Path:
        return self.path / "arms" / _check_name("arm name", arm)

    def record_writer(self, arm: str, name: str = "requests", *, fsync: bool = False) -> RecordWriter:
        """The writer for ``arms/<arm>/<name>.jsonl``; asking twice returns the same open writer."""
        path = self.arm_dir(arm) / f"{_check_name('record file name', name)}.jsonl"
        writer = self._writers.get(path)
        if writer is None or writer.closed:
            writer = RecordWriter(path, secrets=self._secrets, fsync=fsync)
            self._writers[path] = writer
        return writer

    def write_results(self, results: Document) -> Path:
        """Write ``results.json`` atomically: the header fields first, then ``results`` (a `Document`
        from specsuite.results.builder; a caller holding a dict types it once with `Document.from_dict`).

        ``status`` defaults to "running". ``schema_version``, ``created_utc``,
        ``specsuite_version`` and ``run_id`` are always this module's, whatever ``results`` says.
        Every repeat is written with its ``repeat``, ``cases`` and ``workloads`` (version 3).
        """
        status = results.status if results.has("status") else "running"
        if status not in STATUSES:
            raise SpecsuiteError(f"invalid run status {status!r}; expected one of {', '.join(STATUSES)}")
        data = results.to_dict()
        document: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "created_utc": self.created_utc,
            "specsuite_version": specsuite_version(),
            "run_id": self.run_id,
            "status": status,
        }
        document.update((key, complete_arms(value) if key == "arms" and isinstance(value, dict) else value)
                        for key, value in data.items() if key not in _RESERVED_KEYS)
        self._last = document
        return write_json_atomic(self.results_path, document, secrets=self._secrets)

    def mark_interrupted(self, where: str) -> Path:
        """Rewrite ``results.json`` with everything written so far, status "interrupted" and ``stopped_at``."""
        return self.write_results(Document.from_dict({**self._last, "status": "interrupted", "stopped_at": where}))

    def mark_failed(self, error: str) -> Path:
        """Rewrite ``results.json`` with everything written so far, status "failed" and ``error``."""
        return self.write_results(Document.from_dict({**self._last, "status": "failed", "error": error}))

    def close(self) -> None:
        """Close every record writer handed out."""
        for writer in self._writers.values():
            writer.close()

    def __enter__(self) -> RunDirectory:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def _parse_json(raw: bytes, where: str) -> Any:
    """Parsed JSON, or one line naming where the bad JSON is."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise SpecsuiteError(f"{where} is not valid JSON: {exc}") from None


def load_results(path: str | os.PathLike[str]) -> Document:
    """Read a ``results.json`` (or the run folder holding one), check its schema version, and
    return it typed in the current shape (an older file is upgraded on its dict, then typed)."""
    target = Path(path)
    if target.is_dir():
        target = target / RESULTS_FILE
    try:
        raw = target.read_bytes()
    except OSError as exc:
        raise SpecsuiteError(f"cannot read results file {target}: {exc.strerror}") from None
    data = _parse_json(raw, f"results file {target}")
    if not isinstance(data, dict):
        raise SpecsuiteError(f"results file {target} does not hold a JSON object")
    _check_version(data.get("schema_version"), target)  # read raw: the version decides how the rest is read
    return upgraded_document(data)


def _check_version(version: Any, target: Path) -> None:
    if version is None:
        raise SpecsuiteError(
            f"results file {target} has no schema_version; this specsuite reads schema_version {SCHEMA_VERSION}"
        )
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise SpecsuiteError(f"results file {target} has an invalid schema_version {version!r}")
    if version > SCHEMA_VERSION:
        raise SpecsuiteError(
            f"results file {target} has schema_version {version}, newer than the supported "
            f"{SCHEMA_VERSION}; upgrade specsuite to read it"
        )


def read_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read a JSONL record file. A torn last line (a crash mid-write) is dropped; a bad line elsewhere is an error."""
    target = Path(path)
    try:
        lines = target.read_bytes().split(b"\n")
    except OSError as exc:
        raise SpecsuiteError(f"cannot read record file {target}: {exc.strerror}") from None
    complete_lines = lines[:-1]  # text after the final newline was never finished
    records = []
    for number, line in enumerate(complete_lines, start=1):
        if not line.strip():
            continue
        record = _parse_json(line, f"record file {target} line {number}")
        if not isinstance(record, dict):
            raise SpecsuiteError(f"record file {target} line {number} is not a JSON object")
        records.append(record)
    return records
