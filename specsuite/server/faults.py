"""Fault classes for failed requests, and the run policy that decides whether a run goes on.

Every failed request is recorded with one error class (`ErrorClass`) next to the request itself.
The transport (`specsuite.server.transport`) raises `RequestFault`, a `SpecsuiteError` that already knows
its class; `classify` names any other exception; `check_generate_result` and `check_stream_result`
turn an answer the workloads cannot use (no `meta_info`, a malformed `finish_reason`, an error
object in a 200 body) into a `RequestFault` too.

The policy (`RunPolicy`, applied by a `FaultGuard` shared by one run's requests):

1. Retry only 429 and 503. Each is retried up to `max_retries` times (default 3), after the
   server's Retry-After (seconds or an HTTP date) capped at `retry_after_cap_s` (default 10 s), or
   after `backoff_s * 2**attempt` when the server gives none. Nothing else is retried: a retried
   generation would hide the fault and count the request twice.
2. Stop when the server process is gone: a launched server whose process has exited stops the
   run at the first connection failure (`server_alive` says so).
3. Stop after `max_consecutive_connection_failures` (default 3) connection failures in a row
   with no answered request in between. Connection failures are `CONNECTION_CLASSES`: refused,
   connect timeout, reset, and read timeout (a stalled server). Going on would only turn every
   remaining request into another timeout.
4. Record everything else and go on: 5xx and 429 after their retries, other 4xx, broken streams
   and malformed answers are findings about the server, not reasons to stop.

After a stop, `FaultGuard.check` raises `RunStopped` before a request is sent, so the rest of the
run ends at once; the caller writes what it has and says where it stopped. The spec string
accepted by `RunPolicy.parse` (pytest `--fault-policy`) is `name=value` pairs separated by commas,
e.g. `consecutive=5,retries=2,retry_cap=30,backoff=0.5`.
"""

from __future__ import annotations

import email.utils
import errno
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from enum import Enum
from typing import Any, TypeVar

import requests

from specsuite.errors import SpecsuiteError

T = TypeVar("T")
U = TypeVar("U")


class ErrorClass(str, Enum):
    """What went wrong with one request; the value is what records and results.json store."""

    CONNECTION_REFUSED = "connection_refused"
    CONNECT_TIMEOUT = "connect_timeout"
    CONNECTION_RESET = "connection_reset"
    TIMEOUT = "timeout"  # no answer, or no stream data, within the read timeout
    HTTP_429 = "http_429"
    HTTP_5XX = "http_5xx"
    HTTP_AUTH = "http_auth"  # 401/403
    HTTP_4XX = "http_4xx"
    RESPONSE_NOT_JSON = "response_not_json"
    ERROR_OBJECT = "error_object"  # a 200 whose body is an error object
    STREAM_TRUNCATED = "stream_truncated"  # the stream ended or broke off before data: [DONE]
    STREAM_NON_JSON = "stream_non_json"  # a line that is not SSE, or data that is not a JSON object
    STREAM_ERROR_OBJECT = "stream_error_object"  # SGLang's data: {"error": {...}} inside a 200 stream
    MISSING_META_INFO = "missing_meta_info"
    BAD_FINISH_REASON = "bad_finish_reason"
    MALFORMED_RESPONSE = "malformed_response"  # any other answer shape the workloads cannot read
    SERVER_ABORT = "server_abort"  # finish_reason type "abort"
    OTHER = "other"

    def __str__(self) -> str:
        return self.value


CONNECTION_CLASSES = frozenset(
    {ErrorClass.CONNECTION_REFUSED, ErrorClass.CONNECT_TIMEOUT, ErrorClass.CONNECTION_RESET, ErrorClass.TIMEOUT}
)
RETRY_STATUSES = frozenset({429, 503})
FINISH_TYPES = frozenset({"stop", "length", "abort"})
REQUIRED_META_FIELDS = ("finish_reason", "prompt_tokens", "completion_tokens")


class RequestFault(SpecsuiteError):
    """A one-line request failure that carries its error class (and, for HTTP errors, the status
    and the server's Retry-After in seconds)."""

    def __init__(self, error_class: ErrorClass, message: str, *, status: int | None = None,
                 retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.error_class = ErrorClass(error_class)
        self.status = status
        self.retry_after_s = retry_after_s


class RunStopped(SpecsuiteError):
    """Raised instead of sending a request once the policy has stopped the run."""


def status_class(status: int) -> ErrorClass:
    """The error class of a non-2xx HTTP status."""
    if status == 429:
        return ErrorClass.HTTP_429
    if status >= 500:
        return ErrorClass.HTTP_5XX
    if status in (401, 403):
        return ErrorClass.HTTP_AUTH
    return ErrorClass.HTTP_4XX


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date); None if absent or unreadable."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - (now or datetime.now(timezone.utc))).total_seconds())


def _aiohttp_class(exc: BaseException) -> ErrorClass | None:
    # Only consulted when aiohttp is already loaded: an aiohttp exception implies it is.
    aiohttp = sys.modules.get("aiohttp")
    if aiohttp is None:
        return None
    if isinstance(exc, aiohttp.ClientResponseError):
        return status_class(exc.status)
    if isinstance(exc, aiohttp.ClientPayloadError):
        return ErrorClass.STREAM_TRUNCATED
    if isinstance(exc, (aiohttp.ServerDisconnectedError, aiohttp.ClientConnectionResetError)):
        return ErrorClass.CONNECTION_RESET
    if isinstance(exc, aiohttp.ServerTimeoutError):
        return ErrorClass.TIMEOUT
    return None


def _os_error_class(exc: OSError) -> ErrorClass:
    if isinstance(exc, ConnectionRefusedError) or exc.errno == errno.ECONNREFUSED:
        return ErrorClass.CONNECTION_REFUSED
    if isinstance(exc, TimeoutError):
        return ErrorClass.TIMEOUT
    return ErrorClass.CONNECTION_RESET


def classify(exc: BaseException) -> ErrorClass:
    """The error class of any exception a request can raise."""
    if isinstance(exc, RequestFault):
        return exc.error_class
    found = _aiohttp_class(exc)
    if found is not None:
        return found
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return ErrorClass.CONNECT_TIMEOUT
    if isinstance(exc, requests.exceptions.ReadTimeout):
        return ErrorClass.TIMEOUT
    if isinstance(exc, requests.exceptions.ChunkedEncodingError):
        return ErrorClass.STREAM_TRUNCATED
    if isinstance(exc, requests.exceptions.ConnectionError):
        text = repr(exc).lower()
        if "refused" in text or "errno 111" in text:
            return ErrorClass.CONNECTION_REFUSED
        return ErrorClass.TIMEOUT if "timed out" in text else ErrorClass.CONNECTION_RESET
    if isinstance(exc, requests.exceptions.HTTPError) and exc.response is not None:
        return status_class(exc.response.status_code)
    if isinstance(exc, OSError):
        return _os_error_class(exc)
    return ErrorClass.OTHER


# --------------------------------------------------------------------------- answer shapes
def _finish_problem(finish: Any) -> str | None:
    """Why a finished answer's finish_reason is malformed, or None when it is well formed."""
    if finish is None:
        return "finish_reason is null on a finished answer"
    if not isinstance(finish, Mapping):
        return f"finish_reason is {type(finish).__name__} {finish!r:.60}, not an object with a type"
    kind = finish.get("type")
    if kind not in FINISH_TYPES:
        return f"finish_reason type {kind!r:.40} is not one of stop, length, abort"
    if kind == "length" and (not isinstance(finish.get("length"), int) or isinstance(finish.get("length"), bool)):
        return f"length finish has no integer length: {dict(finish)!r:.80}"
    if kind == "stop" and "matched" not in finish:
        return "stop finish has no matched field"
    return None


def check_generate_result(result: Any, where: str = "/generate") -> None:
    """Raise a `RequestFault` when a native /generate answer (an object, or a list for batches)
    cannot be used: an error object, no meta_info or missing fields in it, a malformed or abort
    finish_reason, or output_ids that are not a list."""
    for item in result if isinstance(result, list) else [result]:
        if not isinstance(item, Mapping):
            raise RequestFault(ErrorClass.MALFORMED_RESPONSE, f"{where} answered {type(item).__name__}, not an object")
        if "meta_info" not in item and ("error" in item or item.get("object") == "error"):
            raise RequestFault(ErrorClass.ERROR_OBJECT, f"{where} answered HTTP 200 with an error object: {str(item)[:160]}")
        meta = item.get("meta_info")
        if not isinstance(meta, Mapping):
            raise RequestFault(ErrorClass.MISSING_META_INFO, f"{where} answer has no meta_info object")
        missing = [name for name in REQUIRED_META_FIELDS if name not in meta]
        if missing:
            raise RequestFault(ErrorClass.MISSING_META_INFO, f"{where} meta_info lacks {', '.join(missing)}")
        for name in ("prompt_tokens", "completion_tokens"):
            value = meta[name]
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise RequestFault(ErrorClass.MISSING_META_INFO, f"{where} meta_info.{name} is {value!r:.40}, not a count")
        problem = _finish_problem(meta["finish_reason"])
        if problem is not None:
            raise RequestFault(ErrorClass.BAD_FINISH_REASON, f"{where}: {problem}")
        if meta["finish_reason"]["type"] == "abort":
            raise RequestFault(ErrorClass.SERVER_ABORT, f"{where}: server aborted the request: {str(meta['finish_reason'].get('message'))[:160]}")
        if not isinstance(item.get("output_ids", []), list):
            raise RequestFault(ErrorClass.MALFORMED_RESPONSE, f"{where} output_ids is not a list")


def check_stream_result(chunks: list[dict[str, Any]], where: str = "/generate stream") -> dict[str, Any]:
    """The final chunk of a single-request native stream, checked like a non-stream answer.

    Every chunk needs a meta_info object; only the last may carry a finish_reason. An empty
    stream (only data: [DONE]) is truncated.
    """
    if not chunks:
        raise RequestFault(ErrorClass.STREAM_TRUNCATED, f"{where} sent data: [DONE] without any chunk")
    for number, chunk in enumerate(chunks[:-1], start=1):
        meta = chunk.get("meta_info")
        if not isinstance(meta, Mapping):
            raise RequestFault(ErrorClass.MISSING_META_INFO, f"{where} chunk {number} has no meta_info object")
        if meta.get("finish_reason") is not None:
            raise RequestFault(ErrorClass.BAD_FINISH_REASON, f"{where} chunk {number} of {len(chunks)} already has a finish_reason")
    check_generate_result(chunks[-1], where)
    return chunks[-1]


# --------------------------------------------------------------------------- policy
@dataclass(frozen=True)
class RunPolicy:
    """The documented rules (module docstring) with their numbers."""

    max_consecutive_connection_failures: int = 3
    max_retries: int = 3
    retry_after_cap_s: float = 10.0
    backoff_s: float = 1.0

    _SPEC_NAMES = {"consecutive": "max_consecutive_connection_failures", "retries": "max_retries",
                   "retry_cap": "retry_after_cap_s", "backoff": "backoff_s"}

    def __post_init__(self) -> None:
        if self.max_consecutive_connection_failures < 1:
            raise SpecsuiteError("fault policy: consecutive must be at least 1")
        if self.max_retries < 0 or self.retry_after_cap_s < 0 or self.backoff_s < 0:
            raise SpecsuiteError("fault policy: retries, retry_cap and backoff must not be negative")

    @classmethod
    def parse(cls, spec: str | None) -> RunPolicy:
        """A policy from `consecutive=N,retries=N,retry_cap=S,backoff=S` (any subset; empty: defaults)."""
        values: dict[str, Any] = {}
        for part in (spec or "").split(","):
            if not part.strip():
                continue
            name, sep, text = part.partition("=")
            field_name = cls._SPEC_NAMES.get(name.strip())
            if not sep or field_name is None:
                raise SpecsuiteError(f"fault policy: expected one of {', '.join(cls._SPEC_NAMES)} as name=value, got {part.strip()!r}")
            try:
                values[field_name] = int(text) if field_name in ("max_consecutive_connection_failures", "max_retries") else float(text)
            except ValueError:
                raise SpecsuiteError(f"fault policy: {name.strip()} needs a number, got {text.strip()!r}") from None
        return cls(**values)

    def retry_delay(self, fault: RequestFault, attempt: int) -> float | None:
        """Seconds to wait before retry number `attempt` (1-based), or None when not to retry."""
        if fault.status not in RETRY_STATUSES or attempt > self.max_retries:
            return None
        if fault.retry_after_s is not None:
            return min(fault.retry_after_s, self.retry_after_cap_s)
        return min(self.backoff_s * 2 ** (attempt - 1), self.retry_after_cap_s)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Outcome:
    """A successful call and how many attempts it took (more than one after 429/503 retries)."""

    value: Any
    attempts: int


@dataclass
class FaultGuard:
    """Applies a `RunPolicy` to every request of one run; thread-safe.

    `server_alive` (for a launched server: is its process still running) is asked after each
    connection failure. `sleep` is injectable so tests can check the waits without sleeping.
    """

    policy: RunPolicy = field(default_factory=RunPolicy)
    server_alive: Callable[[], bool] | None = None
    sleep: Callable[[float], None] = time.sleep
    counts: Counter[str] = field(default_factory=Counter)
    retries: int = 0
    consecutive_connection_failures: int = 0
    stop_reason: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def stopped(self) -> bool:
        return self.stop_reason is not None

    def check(self) -> None:
        """Raise `RunStopped` when the policy has stopped the run."""
        if self.stop_reason is not None:
            raise RunStopped(f"not sent: {self.stop_reason}")

    def run(self, send: Callable[[], T], validate: Callable[[T], U] | None = None) -> Outcome:
        """Send with the policy's retries, then `validate` the answer; account for the result.

        The outcome's value is what `validate` returns (the raw answer without one). A
        `SpecsuiteError` from `validate` that has no class becomes `malformed_response`. Raises
        `RunStopped` when the run is already stopped, else the request's `RequestFault` (or
        unclassified `SpecsuiteError`) after recording it. Other exceptions (bugs) pass through.
        """
        attempt = 1
        while True:
            self.check()
            try:
                value = send()
            except SpecsuiteError as exc:
                delay = self.policy.retry_delay(exc, attempt) if isinstance(exc, RequestFault) else None
                if delay is None:
                    self.record_failure(exc)
                    raise
                with self._lock:
                    self.retries += 1
                self.sleep(delay)
                attempt += 1
                continue
            self.record_answer()
            if validate is None:
                return Outcome(value, attempt)
            try:
                return Outcome(validate(value), attempt)
            except SpecsuiteError as exc:
                fault = exc if isinstance(exc, RequestFault) else RequestFault(ErrorClass.MALFORMED_RESPONSE, str(exc))
                self.record_failure(fault)
                raise fault from None

    def record_answer(self) -> None:
        """The server answered: the connection-failure streak is over."""
        with self._lock:
            self.consecutive_connection_failures = 0

    def record_failure(self, exc: BaseException) -> ErrorClass:
        """Count a failure and apply the stop rules; returns its class."""
        error_class = classify(exc)
        alive = True
        if error_class in CONNECTION_CLASSES and self.server_alive is not None:
            alive = self.server_alive()
        with self._lock:
            self.counts[error_class.value] += 1
            if error_class not in CONNECTION_CLASSES:
                return error_class
            self.consecutive_connection_failures += 1
            if self.stop_reason is not None:
                return error_class
            if not alive:
                self.stop_reason = f"the server process is gone (after {error_class.value}: {str(exc)[:160]})"
            elif self.consecutive_connection_failures >= self.policy.max_consecutive_connection_failures:
                self.stop_reason = (f"{self.consecutive_connection_failures} connection failures in a row "
                                    f"(last {error_class.value}: {str(exc)[:160]})")
        return error_class

    def summary(self) -> dict[str, Any]:
        """For results.json: the policy, failures per class, retries, and why the run stopped."""
        with self._lock:
            return {"policy": self.policy.to_dict(), "error_classes": dict(sorted(self.counts.items())),
                    "retries": self.retries, "stop_reason": self.stop_reason}


def process_alive_probe(is_running: Callable[[], bool], settle_s: float = 1.0) -> Callable[[], bool]:
    """A `server_alive` check for a launched process: False once it has exited.

    A dying server resets its connections a moment before the process is gone, so a process that
    still runs is watched for up to `settle_s` before it counts as alive.
    """
    def alive() -> bool:
        deadline = time.monotonic() + settle_s
        while is_running():
            if time.monotonic() >= deadline:
                return True
            time.sleep(0.05)
        return False

    return alive


def failure_record(exc: BaseException, request: Mapping[str, Any], **context: Any) -> dict[str, Any]:
    """The JSONL record of a failed request: its context, the error class and message, and the request."""
    return {**context, "status": "error", "error_class": classify(exc).value, "error": str(exc), "request": dict(request)}
