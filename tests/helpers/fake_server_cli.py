"""A tiny stand-in HTTP server for launcher tests: controllable readiness, early exit and children.

Run as ``python -m tests.helpers.fake_server_cli --port N [options]`` or by file path.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--delay-ready", type=float, default=0.0, help="answer 503 on /health for this many seconds")
    parser.add_argument("--exit-early", type=int, default=None, metavar="CODE", help="log a few lines, then exit")
    parser.add_argument("--never-ready", action="store_true", help="answer 503 on /health forever")
    parser.add_argument("--no-health", action="store_true", help="404 on /health; readiness only on /ready")
    parser.add_argument("--child-pid-file", default=None, help="spawn a sleeping child and write its pid here")
    parser.add_argument("--ignore-sigterm", action="store_true")
    parser.add_argument("--require-key-env", default=None, help="demand 'Authorization: Bearer $VAR' on /health")
    parser.add_argument("--print-env", default=None, help="print NAME=value of this environment variable once started")
    parser.add_argument("--api-key", default=None, help="accepted and ignored, like a real server flag")
    return parser.parse_args(argv)


def print_env(name: str | None) -> None:
    if name:
        print(f"{name}={os.environ.get(name, '')}", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(f"fake server starting on port {args.port}", flush=True)
    if args.exit_early is not None:
        for step in range(1, 8):
            print(f"loading step {step}", flush=True)
        print_env(args.print_env)
        print(f"fatal: giving up with code {args.exit_early}", file=sys.stderr, flush=True)
        return args.exit_early
    print_env(args.print_env)
    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.child_pid_file:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        with open(args.child_pid_file, "w") as handle:
            handle.write(str(child.pid))
    ready_at = time.monotonic() + args.delay_ready
    expected_key = os.environ.get(args.require_key_env, "") if args.require_key_env else None
    ready_path = "/ready" if args.no_health else "/health"

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server naming)
            if self.path not in ("/health", "/ready"):
                self.send_response(404)
            elif self.path != ready_path:
                self.send_response(404)
            elif expected_key is not None and self.headers.get("Authorization") != f"Bearer {expected_key}":
                self.send_response(401)
            elif args.never_ready or time.monotonic() < ready_at:
                self.send_response(503)
            else:
                self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *log_args: object) -> None:  # noqa: A002 (base-class name)
            print(f"request: {format % log_args}", file=sys.stderr, flush=True)

    server = HTTPServer((args.host, args.port), Handler)
    print("listening", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
