"""scipy.stats and scipy.optimize, loaded on their first use.

Importing scipy.stats takes about a second; every module that runs a test imports these names instead, so that
what only builds a parser or reads a file (`specsuite --help`, the option table, the family registry) does not pay
for it.  The first attribute read imports the real module; from then on the proxy forwards to it.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    """A module imported on its first attribute read."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attribute: str) -> Any:
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attribute)


stats: Any = LazyModule("scipy.stats")
optimize: Any = LazyModule("scipy.optimize")
