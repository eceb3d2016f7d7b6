"""An installed wheel runs the suites and the main job with no checkout: `pip install` of a built wheel (not editable)
into a temporary venv, then, from a folder outside the checkout, `specsuite run` (the main job on the embedded reference
arms) and `pytest --pyargs specsuite.suites` through the `pytest11` entry point and through `-p`.

Offline and quick: the wheel is built from the tracked files with this venv's setuptools, installed with --no-deps, and
the temporary venv sees this venv's installed dependencies through a plain path line in a .pth file (that folder's own
.pth files, such as an editable install's, are not processed, so the checkout stays out of reach: asserted below).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from specsuite.project_paths import PROJECT_ROOT

pytestmark = pytest.mark.slow

INSTALL_TIMEOUT_S = 300
RUN_TIMEOUT_S = 600
PACKAGES = ("specsuite", "specsuite.suites", "specsuite.fixtures", "specsuite.reports", "specsuite.refserver")


def _tracked_files(root: Path) -> list[str]:
    """The checkout's files as git sees them (tracked, and new files not ignored): what a clean clone would build."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=root,
                            capture_output=True, check=True, timeout=60)
    return [name for name in listed.stdout.decode().split("\0") if name and (root / name).is_file()]


def _copy_source(destination: Path) -> Path:
    if shutil.which("git") is None or not (PROJECT_ROOT / ".git").exists():
        pytest.skip("needs git and a checkout to list the project's files")
    for name in _tracked_files(PROJECT_ROOT):
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(PROJECT_ROOT / name, target)
    return destination


def _venv_with_wheel(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A venv with the project's wheel installed (not editable) and this venv's dependencies visible; its environment."""
    source = _copy_source(tmp_path / "source")
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", str(wheels),
                    str(source)], check=True, timeout=INSTALL_TIMEOUT_S, capture_output=True)
    (wheel,) = wheels.glob("specsuite-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=INSTALL_TIMEOUT_S)
    python = venv / "bin" / "python"
    # pip runs under the new venv's Python (--python), which sees nothing of this venv yet: a clean install.
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q", str(wheel)],
                   check=True, timeout=INSTALL_TIMEOUT_S, capture_output=True)
    site_packages = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                        check=True, capture_output=True, text=True, timeout=60).stdout.strip())
    (site_packages / "zz_specsuite_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "SPECSUITE_SERVER_URL", "PYTEST_ADDOPTS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return venv, env


def _run(command: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)


def test_an_installed_wheel_runs_the_main_job_and_the_suites_outside_the_checkout(tmp_path: Path) -> None:
    started = time.perf_counter()
    venv, env = _venv_with_wheel(tmp_path)
    installed = time.perf_counter()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    python = str(venv / "bin" / "python")

    # The project's packages come from the venv, not from the checkout.
    script = f"import importlib, json; print(json.dumps({{m: importlib.import_module(m).__file__ for m in {PACKAGES!r}}}))"
    where = _run([python, "-c", script], outside, env)
    assert where.returncode == 0, where.stderr
    for module, file in json.loads(where.stdout).items():
        assert Path(file).resolve().is_relative_to(venv.resolve()), f"{module} imported from {file}, not the temporary venv"
    # and they are all under the one name: no generic top-level package goes into site-packages.
    generic = ("harness", "suites", "reports", "refserver", "fixtures", "kernel_loading", "tests", "tools")
    script = f"import importlib.util, json; print(json.dumps([m for m in {generic!r} if importlib.util.find_spec(m)]))"
    found = _run([python, "-c", script], outside, env)
    assert found.returncode == 0 and json.loads(found.stdout) == [], found.stdout + found.stderr

    # The main job (correctness, GSM8K on the bundled synthetic set, the serving benchmark) on the embedded nofix and fix arms.
    results = outside / "results"
    run = _run([str(venv / "bin" / "specsuite"), "run", "--results-dir", str(results), "--run-id", "wheel"], outside, env)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    merged = json.loads((results / "wheel" / "results.json").read_text(encoding="utf-8"))
    assert merged["status"] == "complete"
    assert set(merged["arms"]) == {"nofix", "fix"}
    for arm in merged["arms"].values():
        (repeat,) = arm["repeats"]
        assert repeat["exit_code"] in (0, 1) and repeat["cases"], repeat  # nofix's checks fail by design (the demo arm)
        assert {"gsm8k", "bench"} <= set(repeat["workloads"]), sorted(repeat["workloads"])
        for part in repeat.get("parts") or [repeat]:  # each session ran the installed suites, with the venv's Python
            suites = str(venv.resolve() / "lib")
            assert any(arg.startswith(suites) and arg.endswith("specsuite/suites") for arg in part["command"]), part["command"]
            assert part["command"][0] == python, part["command"]
    assert "specsuite: verdict: nofix · correctness: worse" in run.stdout, run.stdout[-3000:]
    ran_main_job = time.perf_counter()

    # pytest through the pytest11 entry point (autoloaded), then through -p with entry points off.
    small = ["-m", "correctness", "--temperatures", "0", "--top-p", "1", "-q", "-p", "no:cacheprovider"]
    autoload = _run([python, "-m", "pytest", "--pyargs", "specsuite.suites", *small], outside, env)
    assert autoload.returncode == 0, autoload.stdout[-3000:] + autoload.stderr[-3000:]
    assert "EMBEDDED REFERENCE EMULATION" in autoload.stdout and " passed" in autoload.stdout
    explicit = _run([python, "-m", "pytest", "-p", "specsuite.pytest_plugin.plugin", "--pyargs", "specsuite.suites", *small, "--collect-only"], outside,
                    {**env, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert explicit.returncode == 0, explicit.stdout[-3000:] + explicit.stderr[-3000:]
    assert "tests collected" in explicit.stdout
    print(f"wheel test: build+install {installed - started:.0f} s, specsuite run {ran_main_job - installed:.0f} s, "
          f"pytest --pyargs {time.perf_counter() - ran_main_job:.0f} s")
