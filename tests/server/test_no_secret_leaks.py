"""No output carries the API key or the admin key.

A real `specsuite run` drives the real suites (correctness and GSM8K) against the reference server
launched with `--api-key <planted>` and `--admin-api-key <planted admin>`, the keys given to
specsuite only through SPECSUITE_API_KEY and SPECSUITE_ADMIN_API_KEY (every case and GSM8K run
flushes the cache, which needs the admin key: results.json then has no flush warning). Then
every byte it produced is searched for the key: the whole results folder (results.json, the JSONL
records, session results and logs, the launched server's log, summary.md, the rendered report with
its PNGs and CSV), the JUnit XML of the session (with captured logs in it), and the CLI's stdout and
stderr. The server really demands the key and really echoes it in /server_info, and the scanner is
shown to find it there, so a clean result is not a vacuous one.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import requests

from specsuite.server.launcher import find_free_port, launch_reference_server, reference_server_command

REPO = Path(__file__).resolve().parents[2]
PLANTED_KEY = "sk-planted-Zq8vR2mXk4LtW9cY"
FRAGMENT = PLANTED_KEY[len("sk-planted-"):][:10]  # a cut-off key must not survive either
PLANTED_ADMIN_KEY = "sk-admin-planted-Hb3nT7wQp2"
ADMIN_FRAGMENT = PLANTED_ADMIN_KEY[len("sk-admin-planted-"):]
RUN_TIMEOUT_S = 300


def leaks_in(data: bytes) -> list[str]:
    """Which forms of the planted key appear in `data`."""
    return [form for form in (PLANTED_KEY, FRAGMENT, PLANTED_ADMIN_KEY, ADMIN_FRAGMENT) if form.encode() in data]


def leaking_files(folder: Path) -> dict[str, list[str]]:
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and (forms := leaks_in(path.read_bytes())):
            found[str(path.relative_to(folder))] = forms
    return found


def test_the_scanner_finds_the_key_where_the_server_echoes_it(tmp_path):
    """The reference server demands the key and echoes both keys in /server_info, as SGLang does."""
    with launch_reference_server("fix", tmp_path / "log", extra_args=("--api-key", PLANTED_KEY, "--admin-api-key", PLANTED_ADMIN_KEY),
                                 api_key=PLANTED_KEY,
                                 ready_timeout_s=120) as server, requests.Session() as http:
        http.trust_env = False
        assert http.get(f"{server.base_url}/server_info", timeout=5).status_code == 401
        echoed = http.get(f"{server.base_url}/server_info", headers={"Authorization": f"Bearer {PLANTED_KEY}"}, timeout=5)
    scanned = tmp_path / "scan"
    scanned.mkdir()
    (scanned / "server_info.json").write_bytes(echoed.content)
    assert leaking_files(scanned) == {"server_info.json": [PLANTED_KEY, FRAGMENT, PLANTED_ADMIN_KEY, ADMIN_FRAGMENT]}


def test_no_output_of_a_real_run_contains_the_key(tmp_path):
    results = tmp_path / "results"
    launch = shlex.join(reference_server_command("fix", port=find_free_port(),
                                                 extra_args=("--api-key", PLANTED_KEY, "--admin-api-key", PLANTED_ADMIN_KEY)))
    command = [sys.executable, "-m", "specsuite.cli.main", "run", "--arm", f"keyed={launch}", "--results-dir", str(results),
               "-m", "correctness or gsm8k", "--temperatures", "0", "--top-p", "1.0",
               "--pytest-arg=--gsm8k-num-questions=4", "--pytest-arg=--gsm8k-num-shots=2",
               "--pytest-arg=-o", "--pytest-arg=junit_logging=all", "--pytest-arg=-rA", "--pytest-arg=--log-level=DEBUG"]
    env = {**os.environ, "SPECSUITE_API_KEY": PLANTED_KEY, "SPECSUITE_ADMIN_API_KEY": PLANTED_ADMIN_KEY, "PYTHONPATH": str(REPO)}
    env.pop("SPECSUITE_API_KEY_FILE", None)
    env.pop("SPECSUITE_ADMIN_API_KEY_FILE", None)
    completed = subprocess.run(command, cwd=REPO, env=env, capture_output=True, timeout=RUN_TIMEOUT_S)
    output = completed.stdout + completed.stderr
    assert completed.returncode in (0, 1), output.decode(errors="replace")[-3000:]  # the run itself worked

    produced = sorted(str(p.relative_to(results)) for p in results.rglob("*") if p.is_file())
    # The run wrote what it should: otherwise "no leak" would prove nothing.
    for expected in ("results.json", "summary.md", "report/report.html", "sessions/keyed-r1/results.json",
                     "sessions/keyed-r1/arms/keyed/requests.jsonl", "sessions/keyed-r1/arms/keyed/gsm8k.jsonl", "sessions/keyed-r1.log"):
        assert any(path.endswith(expected) for path in produced), f"{expected} missing from {produced}"
    assert any(path.endswith("server.log") for path in produced) and any(path.endswith(".png") for path in produced)
    # the session's own JUnit XML (specsuite run writes it; -o junit_logging=all puts every log line in it)
    junit = results / next(p for p in produced if p.endswith("keyed-r1.junit.xml"))
    assert b"<testcase" in junit.read_bytes()
    assert b"keyed" in output and b"--api-key" in (results / next(p for p in produced if p.endswith("server.log"))).read_bytes()

    session = json.loads((results / next(p for p in produced if p.endswith("sessions/keyed-r1/results.json"))).read_text())
    assert session["warnings"] == []  # every flush went through: the admin key was sent and accepted
    assert session["server_under_test"]["reference_emulation"] is True
    # The launched arm is the reference server: summary.md and the report say so on their first line.
    for written in ("summary.md", "report/report.md"):
        first = (results / next(p for p in produced if p.endswith(written))).read_text().splitlines()[0]
        assert first.startswith("**Server under test: the reference emulation**"), (written, first)

    assert leaking_files(results) == {}
    assert leaks_in(junit.read_bytes()) == []
    assert leaks_in(output) == []
