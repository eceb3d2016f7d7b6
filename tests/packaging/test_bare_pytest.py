"""A pytest of another Python than the project's (the system's, the venv not activated) says so in one line and exits
4, instead of a 69-line traceback of the plugin's first failed import (`No module named 'tqdm'`).

The other Python is simulated: this venv's Python with `tqdm` hidden (`sys.modules['tqdm'] = None` makes it unfindable)
and entry points off (the system's pytest has no specsuite installed, so only the checkout's conftest.py loads the
plugin).  Where the system's own `python3 -m pytest` exists and lacks a project package, it is run too."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 300  # a collection-free start; generous for a loaded machine, never reached when it works


def _run(python: str, prelude: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    code = f"{prelude}import pytest, sys; sys.exit(pytest.main(['-p', 'no:cacheprovider', '--co', '-q', 'suites/']))"
    return subprocess.run([python, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)


def _assert_one_line(result: subprocess.CompletedProcess[str]) -> None:
    output = (result.stdout + result.stderr).strip()
    assert result.returncode == 4, output
    assert "Traceback" not in output and len(output.splitlines()) == 1, output
    assert "lacks the project's packages" in output and ".venv/bin/python -m pytest" in output, output


def test_a_pytest_without_the_project_packages_says_so_in_one_line() -> None:
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONPATH": str(ROOT)}
    result = _run(sys.executable, "import sys; sys.modules['tqdm'] = None; ", env)
    _assert_one_line(result)
    assert "(tqdm)" in result.stderr


def test_the_entry_point_of_a_checkouts_egg_info_says_so_in_one_line(tmp_path: Path) -> None:
    """`pip install -e .` leaves specsuite.egg-info in the checkout; a Python started there finds its `pytest11` entry
    point on sys.path ('') and loads the plugin before any conftest.py: the plugin itself must give the one line.
    Simulated in a folder with that egg-info and the package (no conftest.py), with `tqdm` hidden."""
    info = tmp_path / "specsuite.egg-info"
    info.mkdir()
    (info / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: specsuite\nVersion: 0.1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[pytest11]\nspecsuite.pytest_plugin.plugin = specsuite.pytest_plugin.plugin\n",
                                           encoding="utf-8")
    (tmp_path / "specsuite").symlink_to(ROOT / "specsuite")
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTEST_DISABLE_PLUGIN_AUTOLOAD")}
    code = "import sys; sys.modules['tqdm'] = None; import pytest; sys.exit(pytest.main(['-p', 'no:cacheprovider', '--co', '-q']))"
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    _assert_one_line(result)


def test_the_system_pytest_says_so_in_one_line() -> None:
    venv_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join(part for part in os.environ.get("PATH", "").split(os.pathsep) if part != venv_bin)
    system = shutil.which("python3", path=path)
    if system is None:
        pytest.skip("no other python3 on this machine")
    probe = subprocess.run([system, "-c", "import pytest, tqdm"], capture_output=True, text=True, timeout=60)
    if probe.returncode == 0 or "No module named 'pytest'" in probe.stderr:
        pytest.skip(f"{system} has the project's packages, or no pytest")
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    _assert_one_line(_run(system, "", env))
