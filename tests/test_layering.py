"""The import layering the project promises, checked on the source: imports go one way.

- `harness/` never imports pytest or `suites/`; only its command line (`harness.cli`) calls the
  renderers of `reports/`; of `fixtures/` only the reference server's contract module
  (harness/server/refserver_contract.py) imports anything;
- `reports/` reads results only: it imports nothing of `harness/` but the typed results model
  (`harness.results.types`, which imports nothing of the project), nor of `suites/` or `fixtures/`;
- the modules of `harness/` form no import cycle.

Relative imports count, and so do modules loaded by name (`importlib.import_module`,
`importlib.resources.files`): the fixtures' data is reached by path (harness.project_paths), not
by importing `fixtures.data`.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = "harness.server.refserver_contract"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


# Calls that load a module named by a string: importlib.import_module, importlib.resources.files, __import__.
_LOADERS = {"import_module", "files", "__import__"}


def _imports(path: Path) -> Iterator[str]:
    """Every module a file imports, wherever the statement sits: relative imports made absolute,
    and modules loaded by name (`importlib.import_module("x")`, `resources.files("x")`)."""
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in _LOADERS:
                yield node.args[0].value


def _package_imports(package: str) -> dict[str, set[str]]:
    return {_module_name(path): set(_imports(path)) for path in sorted((ROOT / package).rglob("*.py"))}


def _top(name: str) -> str:
    return name.partition(".")[0]


def test_harness_imports_no_test_framework_or_suites_and_only_its_cli_renders():
    def forbidden(module: str) -> set[str]:
        return {"pytest", "_pytest", "suites"} | (set() if module.startswith("harness.cli") else {"reports"})

    offenders = {module: sorted(name for name in names if _top(name) in forbidden(module))
                 for module, names in _package_imports("harness").items()}
    assert not {module: names for module, names in offenders.items() if names}


def test_only_the_contract_module_imports_the_reference_server():
    offenders = {module: sorted(name for name in names if _top(name) == "fixtures")
                 for module, names in _package_imports("harness").items() if module != CONTRACT}
    assert not {module: names for module, names in offenders.items() if names}


RESULTS_MODEL = "harness.results.types"  # the typed results model: what "reads results" reads (it imports nothing of the project)


def test_reports_read_results_only():
    offenders = {module: sorted(name for name in names if _top(name) in {"harness", "suites", "fixtures", "pytest"}
                                and name != RESULTS_MODEL and not name.startswith(RESULTS_MODEL + "."))
                 for module, names in _package_imports("reports").items()}
    assert not {module: names for module, names in offenders.items() if names}


def test_harness_has_no_import_cycle():
    graph = _package_imports("harness")
    modules = set(graph)
    # An import of `harness.a.b` (or of name `b` from `harness.a`) depends on the module `harness.a.b`
    # when it is one, else on `harness.a`.
    edges = {module: {name if name in modules else name.rpartition(".")[0] for name in names
                      if _top(name) == "harness"} & modules - {module}
             for module, names in graph.items()}
    # A package's __init__ that re-exports its submodules is not a cycle with them: drop the
    # edges from a package to its own children.
    edges = {module: {dep for dep in deps if not dep.startswith(module + ".")} for module, deps in edges.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        stack.append(module)
        for dep in sorted(edges[module]):
            if state.get(dep) == 1:
                return stack[stack.index(dep):] + [dep]
            if dep not in state and (cycle := visit(dep)):
                return cycle
        stack.pop()
        state[module] = 2
        return None

    for module in sorted(modules):
        if module not in state:
            cycle = visit(module)
            assert cycle is None, " -> ".join(cycle or [])


def test_the_checks_see_relative_imports_and_modules_loaded_by_name(tmp_path, monkeypatch):
    package = tmp_path / "harness" / "sub"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    module = package / "mod.py"
    module.write_text("from . import sibling\nfrom ..other import thing\nimport importlib\n"
                      "importlib.import_module('fixtures.refserver')\nfrom importlib import resources\n"
                      "resources.files('fixtures.data')\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert set(_imports(module)) >= {"harness.sub", "harness.sub.sibling", "harness.other", "harness.other.thing",
                                     "fixtures.refserver", "fixtures.data"}
