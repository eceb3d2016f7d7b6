"""Pooled HTTP connections that are never reused after a long idle spell.

SGLang and vLLM serve through uvicorn, which closes a keep-alive connection after 5 idle seconds
(`SGLANG_TIMEOUT_KEEP_ALIVE`, `srt/environ.py:343` in 0.5.20; `VLLM_HTTP_TIMEOUT_KEEP_ALIVE`,
`vllm/envs.py:111` in 0.32). A client that reuses a connection at about that moment may send its
request into a socket the server is closing: the request fails with "Remote end closed connection
without response" although the server is healthy, and a suite would report a server fault that never
happened. The wider a loaded server's event loop stalls, the wider that window. urllib3 only drops a
connection whose close it has already seen, so this pool also retires any connection idle for longer
than `MAX_IDLE_S`, well inside the servers' 5 s; a fresh connection costs one local handshake.
Nothing is retried: a request that fails on a fresh connection is the server's failure.
"""

from __future__ import annotations

import time

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

# Below every common keep-alive timeout: uvicorn's 5 s (SGLang, vLLM), nginx's 75 s.
MAX_IDLE_S = 2.0

_RELEASED_AT = "specsuite_released_at"


class _IdleExpiry:
    """Stamps a connection when it goes back to the pool; closes it on checkout once it idled too long.

    A closed urllib3 connection reconnects on its next request, so the caller sees a fresh connection.
    """

    def _get_conn(self, timeout: float | None = None) -> HTTPConnection:
        conn = super()._get_conn(timeout)  # type: ignore[misc]
        released_at = getattr(conn, _RELEASED_AT, None)
        if released_at is not None and time.monotonic() - released_at > MAX_IDLE_S:
            conn.close()
        return conn

    def _put_conn(self, conn: HTTPConnection | None) -> None:
        if conn is not None:
            setattr(conn, _RELEASED_AT, time.monotonic())
        super()._put_conn(conn)  # type: ignore[misc]


class IdleExpiringHTTPConnectionPool(_IdleExpiry, HTTPConnectionPool):
    """An http:// pool whose idle connections expire after MAX_IDLE_S."""


class IdleExpiringHTTPSConnectionPool(_IdleExpiry, HTTPSConnectionPool):
    """An https:// pool whose idle connections expire after MAX_IDLE_S."""


class IdleExpiringAdapter(HTTPAdapter):
    """A requests adapter whose pools retire connections idle for longer than MAX_IDLE_S."""

    def init_poolmanager(self, *args, **kwargs) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {
            "http": IdleExpiringHTTPConnectionPool,
            "https": IdleExpiringHTTPSConnectionPool,
        }


def idle_expiring_session() -> requests.Session:
    """A requests.Session whose pooled connections are not reused after MAX_IDLE_S idle seconds."""
    session = requests.Session()
    adapter = IdleExpiringAdapter()
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session
