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

from specsuite.environment_check import exit_unless_project_packages

exit_unless_project_packages()

pytest_plugins = ("specsuite.pytest_plugin.plugin",)
