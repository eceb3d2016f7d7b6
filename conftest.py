"""pytest entry point in the checkout: loads the specsuite plugin (specsuite/pytest_plugin/plugin.py: the `specsuite` option group,
the suites' plugins and markers), which an installed specsuite also registers as the `pytest11` entry point
`specsuite.pytest_plugin.plugin`. Every option is declared once, in the option table (docs/options.md).

    pytest suites/ --server-url http://node:30000      # a running SGLang server
    pytest suites/ --launch "python -m sglang.launch_server ..."
    pytest suites/                                      # the embedded reference server (fix arm)

A pytest of another Python (the system's, the venv not activated) lacks the project's packages: it gets one line
naming the venv and exit 4 (pytest's usage error), not the traceback of the plugin's first failed import.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

# The base install's packages (pyproject.toml `dependencies`) by import name; looked up, not imported (no cost).
PROJECT_PACKAGES = ("numpy", "scipy", "requests", "aiohttp", "orjson", "tokenizers", "transformers", "matplotlib", "tqdm", "jinja2")


def _missing(names: tuple[str, ...]) -> list[str]:
    missing = []
    for name in names:
        try:
            if importlib.util.find_spec(name) is None:
                missing.append(name)
        except (ImportError, ValueError):
            missing.append(name)
    return missing


_MISSING = _missing(PROJECT_PACKAGES)
if _MISSING:
    _venv = Path(__file__).resolve().parent / ".venv"
    sys.stderr.write(f"specsuite: this pytest runs on {sys.executable}, which lacks the project's packages ({', '.join(_MISSING)}): "
                     f"activate the project's venv (`. {_venv}/bin/activate`) or run `{_venv}/bin/python -m pytest ...` "
                     f"(make it with `python3 -m venv .venv && .venv/bin/pip install -e .`)\n")
    raise SystemExit(4)  # pytest's usage error; a SystemExit passes through pytest's conftest import, an ImportError would not

pytest_plugins = ("specsuite.pytest_plugin.plugin",)
