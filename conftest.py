"""pytest entry point: the `specsuite` option group; hooks and fixtures live in suites/pytest_plugin.py
and suites/plugin_<area>.py. Every option is declared once, in harness/cli/options.py (docs/options.md).

    pytest suites/ --server-url http://node:30000      # a running SGLang server
    pytest suites/ --launch "python -m sglang.launch_server ..."
    pytest suites/                                      # the embedded reference server (fix arm)
"""

from __future__ import annotations

import pytest

from harness.cli.options import add_pytest_options

pytest_plugins = (
    "suites.pytest_plugin",
    "suites.plugin_integrity",
    "suites.plugin_lossless",
    "suites.plugin_bench",
    "suites.plugin_history",
    "suites.plugin_kernel",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    # The option table (harness/cli/options.py) declares every option; these are the server, grid and GSM8K ones.
    add_pytest_options(parser.getgroup, "conftest")
