"""The foreground life of a server that a `specsuite serve-*` command started: wait until it is ready,
check it, say where it serves, then keep it until Ctrl-C or SIGTERM, and stop its process group."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from specsuite.cli.exit_codes import EXIT_OK, EXIT_SERVER_FAILED
from specsuite.errors import SpecsuiteError
from specsuite.server.launcher import LaunchedServer


def serve_until_stopped(server: LaunchedServer, name: str, log_path: Path, check_ready: Callable[[], str | None] | None = None) -> int:
    """Run `server` in the foreground. `check_ready` runs once it answers /health: a line to print, or a
    SpecsuiteError naming why the server must not be used (exit 1). Exit 1 too when the server dies."""
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        server.start()
        if check_ready is not None:
            try:
                line = check_ready()
            except SpecsuiteError as exc:
                print(f"specsuite: error: {exc}", file=sys.stderr, flush=True)
                return EXIT_SERVER_FAILED
            if line:
                print(f"specsuite: {line}", flush=True)
        print(f"specsuite: {name} serving at {server.base_url}; Ctrl-C stops it", flush=True)
        while not stop.wait(1.0):
            if not server.running:
                print(f"specsuite: error: {name} exited with code {server.returncode}; see {log_path}", file=sys.stderr)
                return EXIT_SERVER_FAILED
        return EXIT_OK
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.stop()
