"""`specsuite serve-sglang` and its installer: the command the suites need, the environment that puts the
project's ops first, and one line (no traceback) for every way the set-up can be missing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from specsuite.errors import SpecsuiteError
from specsuite.server.kinds.sglang import launch as sglang_launch
from specsuite.server.kinds.sglang.launch import CPU_OPS_SITE, INSTALLER, OPS_BANNER, release_venv, sglang_command, sglang_env

ROOT = Path(__file__).resolve().parents[2]


def fake_release(tmp_path: Path, version: str = "0.5.23") -> Path:
    venv = tmp_path / f"sglang-{version}"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    (venv / ".specsuite-complete").write_text("")
    return venv


def test_eagle_command_serves_the_project_models_with_the_flags_the_suites_need(tmp_path):
    venv = fake_release(tmp_path)
    command = sglang_command(venv, "eagle", port=30999, extra_args=["--log-level", "debug"])
    joined = " ".join(command)
    assert command[:3] == [str(venv / "bin" / "python"), "-m", "sglang.launch_server"]
    assert "--dtype float32" in joined and "--enable-metrics" in joined and "--device cpu" in joined
    assert "--speculative-algorithm EAGLE --speculative-eagle-topk 1" in joined
    assert command[command.index("--speculative-draft-model-path") + 1] == str(venv / "specsuite-eagle")
    assert command[-2:] == ["--log-level", "debug"]
    assert "--speculative-algorithm" not in sglang_command(venv, "none", port=30999)


def test_the_environment_puts_the_project_ops_first(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    env = sglang_env()
    assert env["PYTHONPATH"].split(os.pathsep) == [str(CPU_OPS_SITE), "/elsewhere"]
    assert env["SGLANG_USE_CPU_ENGINE"] == "1"
    # The banner the launcher looks for is the one the ops package prints.
    assert OPS_BANNER in (CPU_OPS_SITE / "sgl_kernel" / "__init__.py").read_text()


def test_missing_or_unserved_releases_are_one_line(tmp_path):
    with pytest.raises(SpecsuiteError, match="not installed in .*install_sglang.sh"):
        release_venv("0.5.23", tmp_path)
    with pytest.raises(SpecsuiteError, match="0.5.17 is not served"):
        release_venv("0.5.17", tmp_path)
    venv = fake_release(tmp_path)
    assert release_venv("0.5.23", tmp_path) == venv


def test_the_command_line_says_what_to_install(tmp_path):
    done = subprocess.run([sys.executable, "-m", "specsuite.cli.main", "serve-sglang", "--sglang-dir", str(tmp_path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "not installed" in lines[0] and "install_sglang.sh" in lines[0], done.stderr


def test_the_installer_refuses_a_release_it_does_not_serve(tmp_path):
    done = subprocess.run(["bash", str(INSTALLER), str(tmp_path), "0.5.17"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == ["install_sglang.sh: SGLang 0.5.17 is not served: the project's CPU ops follow "
                                                "the call sites of 0.5.20 and 0.5.23"]
    assert not list(tmp_path.iterdir())  # nothing made for a refused release


def test_the_default_folder_is_ignored_by_git():
    assert sglang_launch.DEFAULT_SGLANG_DIR == ROOT / ".sglang"
    ignored = subprocess.run(["git", "check-ignore", "-q", ".sglang/sglang-0.5.23/bin/python"], cwd=ROOT, timeout=30)
    assert ignored.returncode == 0
