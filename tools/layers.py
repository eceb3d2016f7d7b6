"""The project's layers, bottom to top: a module imports modules of its own layer or of layers below, never above.

The one statement of the order, read by tools/import_graph.py (which counts the imports that go up) and by
tests/packaging/test_layering.py (which fails on any but its commented allow-list).  A module belongs to the
layer of the longest prefix (a module or a package) that names it; `specsuite.results.store` (the results
writer, which redacts the server's secrets) sits with the server, above the rest of the results model.

- errors: the root error;
- foundation: the paths, the statistics, the typed results model, the kernel loader, the environment check;
- reference server: the reference server and the data it serves (the fixtures), reached from above through
  specsuite.server.refserver_contract only;
- server: talking to a server under test (its kinds included), and the results writer;
- options: the option class, the generic options and the benchmark profiles (specsuite.config); the whole table,
  every family's options included, is assembled above the families (specsuite.session.option_table);
- compare: the comparison building blocks (engines, metric, series);
- kernels: the kernel suite;
- families: the workload families (their workloads, records, metrics and report parts);
- analysis: the A/B analysis over the registered families;
- sessions: the history, a session, its configuration and the option table, the orchestration of runs, and the renderers (which
  read the results model only: tests/packaging/test_layering.py);
- front ends: the command line and the pytest plugin;
- suites: the test suites and the root conftest.
"""

from __future__ import annotations

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("errors", ("specsuite", "specsuite.errors")),
    ("foundation", ("specsuite.project_paths", "specsuite.stats", "specsuite.results", "specsuite.kernel_loading",
                    "specsuite.environment_check")),
    ("reference server", ("specsuite.refserver", "specsuite.fixtures")),
    ("server", ("specsuite.server", "specsuite.results.store")),
    ("options", ("specsuite.config",)),
    ("compare", ("specsuite.compare",)),
    ("kernels", ("specsuite.kernels",)),
    ("families", ("specsuite.families",)),
    ("analysis", ("specsuite.analysis",)),
    ("sessions", ("specsuite.history", "specsuite.session", "specsuite.orchestration", "specsuite.reports")),
    ("front ends", ("specsuite.cli", "specsuite.pytest_plugin")),
    ("suites", ("suites", "conftest")),
)

_PREFIXES = sorted(((prefix, index) for index, (_, prefixes) in enumerate(LAYERS) for prefix in prefixes),
                   key=lambda item: -len(item[0]))


def layer_index(module: str) -> int | None:
    """The layer (index into LAYERS, bottom 0) of a project module; None for a module no layer names."""
    for prefix, index in _PREFIXES:
        if module == prefix or module.startswith(prefix + "."):
            return index
    return None


def layer_name(module: str) -> str | None:
    index = layer_index(module)
    return None if index is None else LAYERS[index][0]


def upward_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) for every edge of the project's import graph that goes to a higher layer, sorted."""
    found = []
    for module, targets in graph.items():
        own = layer_index(module)
        for target in targets:
            theirs = layer_index(target)
            if own is not None and theirs is not None and theirs > own:
                found.append((module, target))
    return sorted(found)
