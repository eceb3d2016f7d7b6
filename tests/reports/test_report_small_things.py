"""Small things a CI owner reads: the suspect explanation once, "none in either arm"
instead of "inconclusive" for rates with no event anywhere, the emulated graph pool named as such, and no empty
results folder when no server was reached."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.main_job_report import render_main_job_report

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def markdown(tmp_path_factory: pytest.TempPathFactory) -> str:
    return (render_main_job_report(tmp_path_factory.mktemp("report")) / "report.md").read_text(encoding="utf-8")


def test_the_suspect_explanation_is_given_once(markdown: str) -> None:
    before_figures, after = markdown.split("## Figures", 1)
    tables = after.split("\n## ", 1)[1]  # past the figures' own captions
    assert before_figures.count("signature of corrupt draft probabilities") == 1
    assert "signature of corrupt draft probabilities" not in tables
    assert sum(line.startswith("- **suspect**: accept length") for line in tables.splitlines()) == 1  # one line, its cases listed


def test_no_event_in_either_arm_is_said_so(markdown: str) -> None:
    assert "**none in either arm**" in markdown
    assert not [line for line in markdown.splitlines() if "no events in either arm" in line and "**inconclusive**" in line]


def test_the_setup_names_the_emulated_graph_pool(markdown: str) -> None:
    setup = markdown.split("## Setup", 1)[1]
    assert "simulated CUDA-graph pool on (CPU emulation)" in setup and "reference emulation of SGLang" in setup
    assert ", CUDA graph on" not in setup


def test_a_server_never_reached_leaves_no_empty_folder(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    done = subprocess.run([sys.executable, "-m", "pytest", str(ROOT / "suites"), "-p", "no:cacheprovider", "-m", "correctness",
                           "--server-url", f"http://127.0.0.1:{port}", "--results-dir", str(tmp_path / "results")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 4, done.stdout + done.stderr
    assert not (tmp_path / "results").exists() or not list((tmp_path / "results").iterdir())
