"""Connections idle past MAX_IDLE_S are not reused, so a server's keep-alive close cannot fail a request.

The server here plays the race deterministically: it answers the first request of every connection and
closes the connection, unanswered, when a second request arrives on it, as a uvicorn server does when its
keep-alive timer fires as the request comes in.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest
import requests

from specsuite.server import idle_connections
from specsuite.server.transport import HttpTransport

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


class OneAnswerPerConnectionServer:
    """Answers one request per connection and closes the connection without an answer on the next."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    @staticmethod
    def _serve(conn: socket.socket) -> None:
        with conn:
            requests_seen = 0
            while conn.recv(65536):
                requests_seen += 1
                if requests_seen > 1:
                    return
                conn.sendall(ANSWER)

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def server():
    served = OneAnswerPerConnectionServer()
    yield served
    served.close()


@pytest.fixture
def short_idle(monkeypatch):
    monkeypatch.setattr(idle_connections, "MAX_IDLE_S", 0.2)
    return 0.2


def test_a_plain_session_fails_on_a_connection_the_server_closes(server, short_idle):
    """The hazard itself: requests reuses the idle connection and the request dies unanswered."""
    with requests.Session() as session:
        session.get(f"http://127.0.0.1:{server.port}/health", timeout=5)
        time.sleep(short_idle + 0.1)
        with pytest.raises(requests.exceptions.ConnectionError, match="closed connection without response"):
            session.get(f"http://127.0.0.1:{server.port}/health", timeout=5)


def test_the_transport_opens_a_fresh_connection_after_the_idle_limit(server, short_idle):
    transport = HttpTransport(f"http://127.0.0.1:{server.port}", timeout_s=5)
    try:
        assert transport.request("GET", "/health").status_code == 200
        time.sleep(short_idle + 0.1)
        assert transport.request("GET", "/health").status_code == 200
    finally:
        transport.close()
    assert server.connections == 2


def test_the_transport_reuses_a_connection_within_the_idle_limit(server, monkeypatch):
    """Inside the limit the connection is kept: here the server's close proves the reuse."""
    monkeypatch.setattr(idle_connections, "MAX_IDLE_S", 60.0)
    transport = HttpTransport(f"http://127.0.0.1:{server.port}", timeout_s=5)
    try:
        transport.request("GET", "/health")
        with pytest.raises(Exception, match="closed connection without response"):
            transport.request("GET", "/health")
    finally:
        transport.close()
    assert server.connections == 1
