"""Start a server as a child process, wait until it answers ready, and always tear it down.

The server runs in its own process group (its own session), so stopping it reaches every
worker it spawned: SIGTERM to the group, up to ``stop_timeout_s`` to exit, then SIGKILL.
An ``atexit`` hook does the same if the caller forgets. The server's stdout and stderr go
to a log file; only a redacted tail of it ever reaches an error message.

The optional API key is sent only as an ``Authorization: Bearer`` header on readiness polls;
it is never put on a command line or written to a log.
"""

from __future__ import annotations

import atexit
import http.client
import logging
import os
import re
import shlex
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from specsuite.errors import SpecsuiteError
from specsuite.project_paths import PROJECT_ROOT, python_path_with
from specsuite.server import refserver_contract
from specsuite.server.secrets import redact, redact_text

logger = logging.getLogger("specsuite.launcher")

POLL_TIMEOUT_S = 2.0
# Seconds to wait for a launched server to answer its health route: every launch, the option defaults included
# (--launch-timeout, serve-vllm/serve-sglang --ready-timeout). A real model loading on CPU takes minutes.
READY_TIMEOUT_S = 900.0
TAIL_LINES = 5
_TAIL_BYTES = 64 * 1024
_TAIL_LINE_CHARS = 300
_KILL_WAIT_S = 5.0
_REAP_INTERVAL_S = 0.05
_PROJECT_ROOT = PROJECT_ROOT
_ARM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def find_free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free right now on ``host``; another process could still take it before use."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def group_members(pgid: int) -> list[int]:
    """The live (non-zombie) processes of group ``pgid``, read from /proc (empty where there is none).

    Zombies are left out: orphaned children are reparented to PID 1, which in a container may
    never reap them, and a zombie cannot hold a port or a GPU anyway.
    """
    members = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # the process ended while we looked
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(entry.name))
    return members


def _group_members_alive(pgid: int) -> bool:
    """True while a live (non-zombie) process is in group ``pgid``."""
    if not Path("/proc").is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return bool(group_members(pgid))


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


class LaunchedServer:
    """A server process started from ``command`` and polled at ``base_url`` until ready.

    ``command`` is an argv list or a shell-style string (split with shlex, never run by a
    shell). ``env`` entries are added to this process's environment. Use as a context manager,
    or call ``start()`` and ``stop()``; ``restart()`` stops and starts the same command, so the
    port stays the same.
    """

    def __init__(
        self,
        command: Sequence[str] | str,
        *,
        base_url: str,
        log_path: str | os.PathLike[str],
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        ready_timeout_s: float = READY_TIMEOUT_S,
        api_key: str | None = None,
        poll_interval_s: float = 0.25,
        stop_timeout_s: float = 10.0,
    ) -> None:
        self.command = shlex.split(command) if isinstance(command, str) else [str(part) for part in command]
        if not self.command:
            raise SpecsuiteError("the server command is empty")
        self.base_url = base_url.rstrip("/")
        self.log_path = Path(log_path)
        self.ready_timeout_s = ready_timeout_s
        self.poll_interval_s = poll_interval_s
        self.stop_timeout_s = stop_timeout_s
        self._env = None if env is None else {**os.environ, **env}
        self._cwd = cwd
        self._api_key = api_key
        self._process: subprocess.Popen[bytes] | None = None
        self._returncode: int | None = None
        self._log_offset = 0
        self._ready_path = "/health"
        # Plain urllib without proxies: a corporate HTTP_PROXY must not intercept localhost polls.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    @property
    def pid(self) -> int | None:
        """The server's pid (also its process-group id) while it runs, else None."""
        return self._process.pid if self.running and self._process else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def returncode(self) -> int | None:
        """Exit status of the last stopped process (negative: killed by that signal); None while running."""
        return self._returncode

    def start(self) -> LaunchedServer:
        """Start the process and block until it is ready; on any failure it is stopped again."""
        if self._process is not None:
            raise SpecsuiteError(f"the server is already started (pid {self._process.pid}); stop it first")
        self._spawn()
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def restart(self) -> LaunchedServer:
        """Stop the server and start the same command again (same port, same log file)."""
        self.stop()
        return self.start()

    def stop(self) -> int | None:
        """SIGTERM the whole process group, wait up to ``stop_timeout_s``, then SIGKILL it.

        Safe to call more than once; returns the server's exit status.
        """
        process = self._process
        if process is None:
            return self._returncode
        atexit.unregister(self.stop)
        pgid = process.pid  # start_new_session made the server its group's leader
        if process.poll() is None or _group_members_alive(pgid):
            _signal_group(pgid, signal.SIGTERM)
            if not self._wait_for_group(process, pgid, self.stop_timeout_s):
                logger.warning("server pid %d ignored SIGTERM for %.0f s; sending SIGKILL", pgid, self.stop_timeout_s)
                _signal_group(pgid, signal.SIGKILL)
                self._wait_for_group(process, pgid, _KILL_WAIT_S)
        self._returncode = process.poll()
        self._process = None
        logger.info("server pid %d stopped with status %s", pgid, self._returncode)
        return self._returncode

    def __enter__(self) -> LaunchedServer:
        if self._process is None:
            self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def _spawn(self) -> None:
        shown = shlex.join(redact(self.command, [self._api_key]))
        try:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.log_path, "ab") as log:
                log.write(f"=== specsuite: starting {shown}\n".encode())
                log.flush()
                self._log_offset = log.tell()
                self._process = subprocess.Popen(
                    self.command,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    env=self._env,
                    cwd=self._cwd,
                )
        except OSError as exc:
            raise SpecsuiteError(f"cannot start server {self.command[0]!r}: {exc.strerror or exc}") from None
        self._returncode = None
        atexit.register(self.stop)
        logger.info("started server pid %d: %s (log %s)", self._process.pid, shown, self.log_path)

    def _wait_ready(self) -> None:
        assert self._process is not None
        started = time.monotonic()
        deadline = started + self.ready_timeout_s
        while True:
            code = self._process.poll()
            if code is not None:
                raise SpecsuiteError(self._early_exit_message(code))
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise SpecsuiteError(
                    f"server was not ready within {self.ready_timeout_s:g} s "
                    f"(polling {self.base_url}{self._ready_path}); see its log {self.log_path}"
                )
            status = self._probe(min(POLL_TIMEOUT_S, remaining))
            if status == 200:
                logger.info("server ready after %.1f s at %s", time.monotonic() - started, self.base_url)
                return
            if status == 404 and self._ready_path == "/health":
                self._ready_path = "/ready"
                continue
            if status == 404:
                raise SpecsuiteError(f"server at {self.base_url} answers 404 on both /health and /ready; is the URL right?")
            if status in (401, 403):
                raise SpecsuiteError(
                    f"server at {self.base_url} refused the readiness probe with HTTP {status}; check the API key"
                )
            time.sleep(max(0.0, min(self.poll_interval_s, deadline - time.monotonic())))

    def _probe(self, timeout_s: float) -> int | None:
        """HTTP status of one readiness poll, or None when nothing answered."""
        request = urllib.request.Request(f"{self.base_url}{self._ready_path}")
        if self._api_key:
            request.add_header("Authorization", f"Bearer {self._api_key}")
        try:
            with self._opener.open(request, timeout=timeout_s) as response:
                return int(response.status)
        except urllib.error.HTTPError as exc:
            exc.close()
            return exc.code
        except (OSError, http.client.HTTPException):
            return None  # not listening yet, reset, or too slow: try again

    def _early_exit_message(self, code: int) -> str:
        if code < 0:
            what = f"server was killed by signal {-code} ({signal.Signals(-code).name})"
        else:
            what = f"server exited with code {code}"
        tail = self._log_tail()
        if not tail:
            return f"{what} before it was ready; it wrote nothing to its log {self.log_path}"
        return f"{what} before it was ready; last log lines: {' | '.join(tail)} (full log: {self.log_path})"

    def _log_tail(self) -> list[str]:
        try:
            with open(self.log_path, "rb") as log:
                size = log.seek(0, os.SEEK_END)
                log.seek(max(self._log_offset, size - _TAIL_BYTES))
                text = log.read().decode("utf-8", errors="replace")
        except OSError:
            return []
        lines = [line.strip() for line in text.splitlines() if line.strip()][-TAIL_LINES:]
        return [redact_text(line, [self._api_key])[:_TAIL_LINE_CHARS] for line in lines]

    def _wait_for_group(self, process: subprocess.Popen[bytes], pgid: int, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while True:
            leader_done = process.poll() is not None  # also reaps the leader
            if leader_done and not _group_members_alive(pgid):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(_REAP_INTERVAL_S)


def reference_server_command(
    arm: str = refserver_contract.DEFAULT_ARM, *, port: int, host: str = "127.0.0.1", extra_args: Sequence[str] = ()
) -> list[str]:
    """The argv of the bundled reference server with the recycled-draft_probs bug's speculative configuration."""
    return refserver_contract.server_command(arm, port=port, host=host, extra_args=extra_args)


def launch_reference_server(
    arm: str = refserver_contract.DEFAULT_ARM,
    log_dir: str | os.PathLike[str] = ".",
    extra_args: Sequence[str] = (),
    ready_timeout_s: float = READY_TIMEOUT_S,
    *,
    host: str = "127.0.0.1",
    api_key: str | None = None,
) -> LaunchedServer:
    """Start the reference server for ``arm`` on a free port and return it once ready.

    The log goes to ``<log_dir>/refserver-<arm>-<port>.log``. The project root is put on
    PYTHONPATH so ``-m specsuite.refserver`` resolves from a plain checkout too.
    """
    if not _ARM_NAME.fullmatch(arm):
        raise SpecsuiteError(f"invalid arm name {arm!r}: use letters, digits, '.', '_' and '-' only")
    port = find_free_port(host)
    python_path = python_path_with(_PROJECT_ROOT)
    server = LaunchedServer(
        reference_server_command(arm, port=port, host=host, extra_args=extra_args),
        base_url=f"http://{_url_host(host)}:{port}",
        log_path=Path(log_dir) / f"refserver-{arm}-{port}.log",
        env={"PYTHONPATH": python_path},
        ready_timeout_s=ready_timeout_s,
        api_key=api_key,
    )
    return server.start()
