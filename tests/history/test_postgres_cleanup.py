"""The PostgreSQL tests leave nothing behind: run without a server given, tests/history/test_history_postgres.py
starts a cluster of its own and, when it ends, no server process of it is left and no file either, in the
temporary folder or in the checkout.

Before: the module started `.ci/start-postgres --no-install`, which wrote `.ci/postgres.url` into the checkout, and
left its server running after the session."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MODULE = "tests/history/test_history_postgres.py"
TIMEOUT_S = 900  # the module's own tests plus a cluster's start and stop, on a loaded machine


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in command:
            found.append(f"{proc.name}: {command.strip()}")
    return found


def test_the_postgres_module_stops_its_server_and_leaves_no_file() -> None:
    pytest.importorskip("psycopg", reason="psycopg is not installed: pip install 'specsuite[postgres]'")
    if not (any(Path("/usr/lib/postgresql").glob("*/bin/initdb")) or shutil.which("initdb")):
        pytest.skip("no PostgreSQL server binaries: the module starts nothing here")
    url_file_before = (REPO / ".ci" / "postgres.url").exists()
    # A temporary folder of this test's own (the server's account must reach it), so that leftovers are this run's.
    tmp = Path(tempfile.mkdtemp(prefix="specsuite-pg-cleanup-"))
    tmp.chmod(0o755)
    try:
        env = {key: value for key, value in os.environ.items() if key not in ("SPECSUITE_TEST_POSTGRES_URL", "SPECSUITE_PG_DIR")}
        env.update(TMPDIR=str(tmp), PYTHONPATH=str(REPO))
        result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "0", MODULE, "-p", "no:randomly"],
                                cwd=REPO, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
        output = result.stdout + result.stderr
        assert result.returncode == 0 and " passed" in output, output
        assert not _processes_mentioning(str(tmp)), _processes_mentioning(str(tmp))
        left = sorted(str(p.relative_to(tmp)) for p in tmp.iterdir() if not p.name.startswith("pytest-of-"))
        assert not left, f"left in the temporary folder: {left}"
        assert url_file_before or not (REPO / ".ci" / "postgres.url").exists(), "the module wrote .ci/postgres.url into the checkout"
    finally:
        for line in _processes_mentioning(str(tmp)):  # a failed run's server must not outlive this test either
            subprocess.run(["kill", line.split(":", 1)[0]], check=False)
        shutil.rmtree(tmp, ignore_errors=True)
