"""The specsuite pytest plugin, as installed: the `pytest11` entry point `specsuite.pytest_plugin.plugin` (pyproject.toml) loads it in
every pytest of an environment where specsuite is installed, and `pytest -p specsuite.pytest_plugin.plugin` names it where entry points
are off. It brings the suites' plugins (hooks and fixtures in specsuite/pytest_plugin/core.py and in each family's module, named
by its registry entry), the server, grid and GSM8K options (every option is declared once, in the option table: docs/options.md) and the suites'
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

from specsuite.families.registry import families  # noqa: E402
from specsuite.session.option_table import add_pytest_options  # noqa: E402

# The suites' plugins: the session's, each registered family's fixtures (its `pytest_plugin`), the history's and the
# kernel suite's.
pytest_plugins = (
    "specsuite.pytest_plugin.core",
    *(family.pytest_plugin for family in families() if family.pytest_plugin),
    "specsuite.pytest_plugin.history",
    "specsuite.pytest_plugin.kernel",
)

# The suites' markers: registered here so that they exist (and --strict-markers holds) wherever the suites run. Each
# family's own comes from the registry (its `marker`); these are the ones no family owns.
GENERIC_MARKERS = (
    "greedy_equality: the lossless suite's T=0 comparison with the reference (the main job leaves it out)",
    "ab: A/B comparisons against a baseline arm",
    "kernel: SGLang's sampler kernel on synthetic inputs (no server; --kernel SOURCE)",
)


def registered_markers() -> tuple[tuple[str, str], ...]:
    """Every registered family's marker (name, description), read at the call: a family registered later has its own."""
    return tuple(family.marker for family in families() if family.marker)


def markers() -> tuple[str, ...]:
    """The `markers` ini lines: the families' own, then the generic ones."""
    return (*(": ".join(marker) for marker in registered_markers()), *GENERIC_MARKERS)


def pytest_addoption(parser: pytest.Parser) -> None:
    # The option table declares every option; these are the server, grid and GSM8K ones (its "plugin" area).
    add_pytest_options(parser.getgroup, "plugin")


def pytest_configure(config: pytest.Config) -> None:
    for line in markers():
        config.addinivalue_line("markers", line)
