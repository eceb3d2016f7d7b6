"""The specsuite pytest plugin, as installed: the `pytest11` entry point `specsuite.pytest_plugin.plugin` (pyproject.toml) loads it in
every pytest of an environment where specsuite is installed, and `pytest -p specsuite.pytest_plugin.plugin` names it where entry points
are off. It brings the suites' plugins (hooks and fixtures in specsuite/pytest_plugin/core.py and specsuite/pytest_plugin/<area>.py), the
server, grid and GSM8K options (every option is declared once, in the option table: docs/options.md) and the suites'
markers, so that an installed wheel runs the suites with no checkout:

    pytest --pyargs specsuite.suites --server-url http://node:30000
    pytest -p specsuite.pytest_plugin.plugin --pyargs specsuite.suites -m correctness      # entry points off (PYTEST_DISABLE_PLUGIN_AUTOLOAD)

In a checkout, conftest.py names this module too (`pytest suites/ ...`); the plugin's name is its module name, so
it loads once whichever way comes first.
"""

from __future__ import annotations

from specsuite.environment_check import exit_unless_project_packages

exit_unless_project_packages()  # a Python without the project's packages: one line, before an import can fail

import pytest  # noqa: E402

from specsuite.session.option_table import add_pytest_options  # noqa: E402

pytest_plugins = (
    "specsuite.pytest_plugin.core",
    "specsuite.pytest_plugin.integrity",
    "specsuite.pytest_plugin.lossless",
    "specsuite.pytest_plugin.bench",
    "specsuite.pytest_plugin.history",
    "specsuite.pytest_plugin.kernel",
)

# The suites' markers: registered here so that they exist (and --strict-markers holds) wherever the suites run.
MARKERS = (
    "correctness: token-validity, stray-character and acceptance checks",
    "gsm8k: GSM8K few-shot accuracy",
    "perf: serving benchmark comparisons",
    "lossless: distribution-preservation tests",
    "greedy_equality: the lossless suite's T=0 comparison with the reference (the main job leaves it out)",
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
