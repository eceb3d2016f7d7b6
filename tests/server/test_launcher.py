"""Tests for specsuite.server.launcher against a stand-in server (tests/helpers/fake_server_cli.py)."""

from __future__ import annotations

import os
import socket
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from specsuite.errors import SpecsuiteError
from specsuite.project_paths import PROJECT_ROOT
from specsuite.server import launcher
from specsuite.server.launcher import LaunchedServer, find_free_port, launch_reference_server, reference_server_command

FAKE_SERVER = Path(__file__).resolve().parents[1] / "helpers" / "fake_server_cli.py"
KEY = "sk-launch-9f8e7d6c5b4a"
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def fake_command(port: int, *options: str) -> list[str]:
    return [sys.executable, str(FAKE_SERVER), "--port", str(port), *options]


def make_server(tmp_path: Path, *options: str, **kwargs) -> LaunchedServer:
    port = find_free_port()
    kwargs.setdefault("ready_timeout_s", 10)
    return LaunchedServer(
        fake_command(port, *options), base_url=f"http://127.0.0.1:{port}", log_path=tmp_path / "server.log", **kwargs
    )


def health_status(base_url: str) -> int:
    with NO_PROXY.open(f"{base_url}/health", timeout=2) as response:
        return response.status


def is_alive(pid: int) -> bool:
    """True for a live process; a zombie left for PID 1 to reap counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


def wait_for_file(path: Path, timeout_s: float = 5.0) -> str:
    deadline = time.monotonic() + timeout_s
    while not path.exists() or not path.read_text():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)
    return path.read_text()


def test_find_free_port_can_be_bound():
    port = find_free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_ready_path_and_clean_stop(tmp_path):
    server = make_server(tmp_path, "--delay-ready", "0.6")
    started = time.monotonic()
    with server:
        assert time.monotonic() - started >= 0.6
        assert server.running and server.pid is not None
        assert health_status(server.base_url) == 200
        pid = server.pid
    assert not server.running and server.pid is None
    assert server.returncode == -15
    assert not is_alive(pid)
    assert "fake server starting" in server.log_path.read_text()


def test_falls_back_to_ready_when_health_is_missing(tmp_path):
    with make_server(tmp_path, "--no-health") as server:
        assert server.running


def test_string_command_is_split_with_shlex(tmp_path):
    port = find_free_port()
    command = f"'{sys.executable}' '{FAKE_SERVER}' --port {port}"
    with LaunchedServer(command, base_url=f"http://127.0.0.1:{port}", log_path=tmp_path / "s.log") as server:
        assert server.command[-2:] == ["--port", str(port)]


def test_early_exit_reports_the_log_tail_in_one_line(tmp_path):
    server = make_server(tmp_path, "--exit-early", "3")
    started = time.monotonic()
    with pytest.raises(SpecsuiteError) as info:
        server.start()
    message = str(info.value)
    assert time.monotonic() - started < 5
    assert message.startswith("server exited with code 3 before it was ready; last log lines: ")
    assert "loading step 7 | fatal: giving up with code 3" in message
    assert "lines: loading step 4 | " in message and "step 3" not in message  # only the last 5 lines
    assert "\n" not in message and "Traceback" not in message
    assert info.value.__cause__ is None and info.value.__context__ is None
    assert server.returncode == 3 and not server.running


def test_timeout_kills_the_server_and_names_the_log(tmp_path):
    child_file = tmp_path / "child.pid"
    server = make_server(tmp_path, "--never-ready", "--child-pid-file", str(child_file), ready_timeout_s=2)
    started = time.monotonic()
    with pytest.raises(SpecsuiteError) as info:
        server.start()
    elapsed = time.monotonic() - started
    assert 2 <= elapsed < 5
    assert "not ready within 2 s" in str(info.value) and str(server.log_path) in str(info.value)
    assert not server.running
    assert not is_alive(int(child_file.read_text()))


def test_stop_kills_the_whole_process_group(tmp_path):
    child_file = tmp_path / "child.pid"
    with make_server(tmp_path, "--child-pid-file", str(child_file)) as server:
        child_pid = int(wait_for_file(child_file))
        assert is_alive(child_pid)
        assert os.getpgid(child_pid) == server.pid
        started = time.monotonic()
    # SIGTERM must reach the child directly, not only after the 10 s SIGKILL escalation.
    assert time.monotonic() - started < 3
    assert not is_alive(child_pid)


def test_sigterm_ignored_escalates_to_sigkill(tmp_path):
    server = make_server(tmp_path, "--ignore-sigterm", stop_timeout_s=0.5)
    server.start()
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 3
    assert server.returncode == -9


def test_restart_keeps_the_port(tmp_path):
    with make_server(tmp_path) as server:
        first_pid, url = server.pid, server.base_url
        server.restart()
        assert server.pid != first_pid and server.base_url == url
        assert health_status(url) == 200
        assert not is_alive(first_pid)
    assert server.log_path.read_text().count("=== specsuite: starting") == 2


def test_starting_twice_is_refused(tmp_path):
    with make_server(tmp_path) as server:
        with pytest.raises(SpecsuiteError, match="already started"):
            server.start()


def test_missing_executable_is_one_line(tmp_path):
    server = LaunchedServer(["/nonexistent/server-binary"], base_url="http://127.0.0.1:1", log_path=tmp_path / "s.log")
    with pytest.raises(SpecsuiteError, match="cannot start server"):
        server.start()


def test_api_key_is_sent_but_never_logged(tmp_path):
    options = ("--require-key-env", "FAKE_EXPECTED_KEY", "--api-key", KEY)
    env = {"FAKE_EXPECTED_KEY": KEY}
    with make_server(tmp_path, *options, env=env, api_key=KEY) as server:
        assert server.running
    log_text = server.log_path.read_text()
    assert KEY not in log_text
    assert "--api-key '***'" in log_text or "--api-key ***" in log_text


def test_wrong_api_key_fails_fast(tmp_path):
    server = make_server(tmp_path, "--require-key-env", "FAKE_EXPECTED_KEY", env={"FAKE_EXPECTED_KEY": KEY},
                         api_key="sk-wrong-key-000")
    with pytest.raises(SpecsuiteError, match="HTTP 401") as info:
        server.start()
    assert KEY not in str(info.value) and "sk-wrong-key-000" not in str(info.value)


def test_api_key_is_redacted_from_the_early_exit_message(tmp_path):
    server = make_server(tmp_path, "--exit-early", "1", "--print-env", "LEAKY", env={"LEAKY": KEY}, api_key=KEY)
    with pytest.raises(SpecsuiteError) as info:
        server.start()
    message = str(info.value)
    assert "LEAKY=*** | fatal: giving up with code 1" in message
    assert KEY not in message


def test_reference_server_command_has_the_seed_configuration():
    command = reference_server_command("bug", port=4321, extra_args=["--verbose"])
    assert command[:3] == [sys.executable, "-m", "specsuite.refserver"]
    joined = " ".join(command[3:])
    assert joined == (
        "--host 127.0.0.1 --port 4321 --arm bug --enable-metrics --speculative-algorithm EAGLE "
        "--speculative-num-steps 5 --speculative-eagle-topk 1 --speculative-num-draft-tokens 6 "
        "--speculative-use-rejection-sampling --random-seed 0 --verbose"
    )


def test_launch_reference_server_wires_port_log_and_pythonpath(tmp_path, monkeypatch):
    def stand_in(arm, *, port, host, extra_args):
        return fake_command(port, "--print-env", "PYTHONPATH", *extra_args)

    monkeypatch.setattr(launcher, "reference_server_command", stand_in)
    with launch_reference_server("fix", tmp_path / "logs", extra_args=["--delay-ready", "0.2"], ready_timeout_s=10) as server:
        port = int(server.base_url.rsplit(":", 1)[1])
        assert server.log_path == tmp_path / "logs" / f"refserver-fix-{port}.log"
        assert health_status(server.base_url) == 200
    assert f"PYTHONPATH={PROJECT_ROOT}" in server.log_path.read_text()
    with pytest.raises(SpecsuiteError, match="invalid arm name"):
        launch_reference_server("../x", tmp_path)
