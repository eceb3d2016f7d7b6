"""HTTP helpers shared by the tests: a proxy-free requests session, and a stdlib HTTP server on a
free port that serves one handler class (for the client tests' fake servers)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests


def http_session() -> requests.Session:
    """A session that never routes localhost through a proxy (one per thread: not thread-safe)."""
    session = requests.Session()
    session.trust_env = False
    return session


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that gave up (timeout tests) leaves the handler a broken pipe


@contextmanager
def serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """`handler` served on 127.0.0.1 at a free port; yields the base URL."""
    server = QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
