"""The specsuite pytest plugin, as installed: the `pytest11` entry point `suites.plugin` (pyproject.toml) loads it in
every pytest of an environment where specsuite is installed, and `pytest -p suites.plugin` names it where entry points
are off. It brings the suites' plugins (hooks and fixtures in suites/pytest_plugin.py and suites/plugin_<area>.py), the
server, grid and GSM8K options (every option is declared once, in the option table: docs/options.md) and the suites'
markers, so that an installed wheel runs the suites with no checkout:

    pytest --pyargs suites --server-url http://node:30000
    pytest -p suites.plugin --pyargs suites -m correctness      # entry points off (PYTEST_DISABLE_PLUGIN_AUTOLOAD)

In a checkout, conftest.py names this module too (`pytest suites/ ...`); the plugin's name is its module name, so
it loads once whichever way comes first.
"""

from __future__ import annotations

import pytest

from harness.config.options import add_pytest_options

pytest_plugins = (
    "suites.pytest_plugin",
    "suites.plugin_integrity",
    "suites.plugin_lossless",
    "suites.plugin_bench",
    "suites.plugin_history",
    "suites.plugin_kernel",
)

# The suites' markers: registered here so that they exist (and --strict-markers holds) wherever the suites run.
MARKERS = (
    "correctness: token-validity, stray-character and acceptance checks",
    "gsm8k: GSM8K few-shot accuracy",
    "perf: serving benchmark comparisons",
    "lossless: distribution-preservation tests",
    "integrity: response accounting and streaming integrity",
    "ab: A/B comparisons against a baseline arm",
    "kernel: SGLang's sampler kernel on synthetic inputs (no server; --kernel SOURCE)",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    # The option table declares every option; these are the server, grid and GSM8K ones (its "plugin" area).
    add_pytest_options(parser.getgroup, "plugin")


def pytest_configure(config: pytest.Config) -> None:
    for line in MARKERS:
        config.addinivalue_line("markers", line)
