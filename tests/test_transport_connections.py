"""The suites' HTTP transport opens one connection per request, so a server that drops an idle
keep-alive connection just as the client reuses it cannot break a request."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from harness.server.transport import HttpTransport


class _OneRequestPerConnection(BaseHTTPRequestHandler):
    """Answers the first request on a connection; a second one on the same connection is read and
    dropped without an answer, as a server does whose keep-alive timer fired at that moment."""

    protocol_version = "HTTP/1.1"
    seen: list[tuple[int, str | None]] = []

    def setup(self) -> None:
        super().setup()
        self.requests_on_connection = 0

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.requests_on_connection += 1
        type(self).seen.append((self.requests_on_connection, self.headers.get("Connection")))
        if self.requests_on_connection > 1:
            self.close_connection = True
            return
        body = json.dumps({"ok": True}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_every_request_gets_its_own_connection() -> None:
    _OneRequestPerConnection.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _OneRequestPerConnection)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        transport = HttpTransport(f"http://127.0.0.1:{server.server_address[1]}", timeout_s=10)
        answers = [transport.request("POST", "/generate", json_body={"n": i}).json() for i in range(5)]
        transport.close()
    finally:
        server.shutdown()
        server.server_close()
    assert answers == [{"ok": True}] * 5
    assert _OneRequestPerConnection.seen == [(1, "close")] * 5
