"""Flush the server's cache before a measurement, and say what is lost when the server refuses.

A flush only resets the server-wide spec counters (`/server_info`'s `avg_spec_accept_length`),
so a refused flush must not end a run: every workload calls `flush_before_measurement`, which
returns a `FlushOutcome` instead of raising when SGLang says no. Refusals it absorbs:

* HTTP 400: requests are running or waiting (`srt/managers/scheduler.py:5518-5546` refuses unless
  fully idle; `srt/entrypoints/http_server.py:1035-1040` answers 400). Retried for `retry_s`.
* HTTP 401/403: the server runs with `--admin-api-key` and the admin key is missing or wrong
  (`srt/utils/auth.py:133-141`). Not retried; the warning names SPECSUITE_ADMIN_API_KEY.

Anything else (connection refused, timeouts, 5xx) is raised as before: the server is in trouble,
and the fault policy must see it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from specsuite.server.faults import ErrorClass, RequestFault
from specsuite.server.protocol import ServerClient

POLL_INTERVAL_S = 0.1


@dataclass(frozen=True)
class FlushOutcome:
    """Whether the flush happened and, when not, the server's reason in one line."""

    flushed: bool
    reason: str | None = None

    def warning(self, affects: str) -> str | None:
        """The one-line warning for a refused flush, naming what it leaves unmeasured; None when flushed."""
        if self.flushed:
            return None
        return f"warning: /flush_cache refused ({self.reason}); {affects}"


def flush_before_measurement(client: ServerClient, *, retry_s: float = 0.0) -> FlushOutcome:
    """POST /flush_cache; a 400 is retried for up to `retry_s` seconds, then reported, not raised."""
    deadline = time.monotonic() + retry_s
    while True:
        try:
            if client.flush_cache():
                return FlushOutcome(True)
        except RequestFault as fault:
            if fault.error_class is ErrorClass.HTTP_AUTH:
                return FlushOutcome(False, str(fault))
            raise
        if time.monotonic() >= deadline:
            waited = f" for {retry_s:g} s" if retry_s > 0 else ""
            return FlushOutcome(False, f"HTTP 400 from {client.base_url}{waited}: requests running or waiting")
        time.sleep(POLL_INTERVAL_S)
