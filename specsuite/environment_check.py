"""Whether this Python has the project's packages: a pytest of another Python (the system's, the venv not activated)
reaches the specsuite plugin from a checkout twice over (its conftest.py, and the `pytest11` entry point that the
checkout's `specsuite.egg-info` declares to any Python started there), and must say so in one line and exit 4 (pytest's
usage error) instead of printing the traceback of the plugin's first failed import.

Standard library only: it runs before anything that could be missing is imported."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

# The base install's packages (pyproject.toml `dependencies`) by import name; looked up, not imported (no cost).
PROJECT_PACKAGES = ("numpy", "scipy", "requests", "aiohttp", "orjson", "tokenizers", "transformers", "matplotlib", "tqdm", "jinja2")
CHECKOUT_VENV = Path(__file__).resolve().parents[1] / ".venv"  # where the README's commands make it


def missing_packages(names: tuple[str, ...] = PROJECT_PACKAGES) -> list[str]:
    """The names among `names` that this Python cannot import."""
    missing = []
    for name in names:
        try:
            if importlib.util.find_spec(name) is None:
                missing.append(name)
        except (ImportError, ValueError):
            missing.append(name)
    return missing


def exit_unless_project_packages(venv: Path = CHECKOUT_VENV) -> None:
    """One line naming the venv and SystemExit(4) when a project package is missing; nothing otherwise. A SystemExit
    passes through pytest's conftest and plugin imports, where an ImportError would become a traceback."""
    missing = missing_packages()
    if missing:
        sys.stderr.write(f"specsuite: this pytest runs on {sys.executable}, which lacks the project's packages ({', '.join(missing)}): "
                         f"activate the project's venv (`. {venv}/bin/activate`) or run `{venv}/bin/python -m pytest ...` "
                         f"(make it with `python3 -m venv .venv && .venv/bin/pip install -e .`)\n")
        raise SystemExit(4)
