"""The project's import graph: modules, edges and cycles, function-level (lazy) imports included.

    PYTHONPATH=$PWD python tools/import_graph.py [--root DIR] [--edges]

Walks the project's own packages (`PACKAGES`, those present under the root) and `conftest.py`, reads
every import wherever it sits (module level, inside a function, under `if TYPE_CHECKING`), relative
imports made absolute, and modules loaded by name (`importlib.import_module("x")`,
`importlib.resources.files("x")`, `__import__("x")`).  An edge goes from a module to the deepest
project module an import names (`from a.b import c` is `a.b.c` when that is a module, else `a.b`);
the packages an import passes through on the way (`a`, `a.b`) are not edges, so a package
`__init__` that re-exports its submodules is not a cycle with them.  A cycle is a strongly connected
component of more than one module, or a module that imports itself.  Besides the cycles it counts the
imports that go up the layer order (tools/layers.py) and names each.

tests/packaging/test_layering.py reads imports with the same `imports_of` and builds the same graph.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: `tools` importable

from tools.layers import upward_imports  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("specsuite", "suites")
TOP_LEVEL_MODULES = ("conftest.py",)

# Calls that load a module named by a string: importlib.import_module, importlib.resources.files, __import__.
_LOADERS = {"import_module", "files", "__import__"}


def module_name(path: Path, root: Path = ROOT) -> str:
    """`specsuite/kernels/loader.py` -> `specsuite.kernels.loader`; a package's `__init__.py` -> the package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, root: Path = ROOT) -> Iterator[str]:
    """Every module name a file imports, wherever the statement sits.  `from a import b` gives `a.b`
    (a module or a name in `a`: `resolve` decides); relative imports are made absolute."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            yield from (f"{base}.{alias.name}" if alias.name != "*" else base for alias in node.names)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if called in _LOADERS:
                yield node.args[0].value


def project_files(root: Path = ROOT, packages: Iterable[str] = PACKAGES, top_level: Iterable[str] = TOP_LEVEL_MODULES) -> list[Path]:
    """The Python files of `packages` and the `top_level` modules present under `root`, sorted."""
    files = [path for package in packages if (root / package).is_dir() for path in sorted((root / package).rglob("*.py"))]
    return files + [root / name for name in top_level if (root / name).is_file()]


def read_imports(root: Path = ROOT, packages: Iterable[str] = PACKAGES, top_level: Iterable[str] = TOP_LEVEL_MODULES) -> dict[str, set[str]]:
    """Module -> every name it imports (project's or not), for the layering rules."""
    return {module_name(path, root): set(imports_of(path, root)) for path in project_files(root, packages, top_level)}


def resolve(name: str, modules: set[str]) -> str | None:
    """The deepest project module `name` lies in, or None when it is not the project's."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def build_graph(imports: dict[str, set[str]]) -> dict[str, set[str]]:
    """Module -> the project modules it imports."""
    modules = set(imports)
    return {module: {target for name in names if (target := resolve(name, modules)) is not None}
            for module, names in imports.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module, and self-imports (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph[node]:
                    found.append(sorted(component))
    return sorted(found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to read (default: this one)")
    parser.add_argument("--edges", action="store_true", help="also list every edge")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    graph = build_graph(read_imports(root))
    found = cycles(graph)
    print(f"root: {root}")
    print(f"packages: {', '.join(p for p in PACKAGES if (root / p).is_dir())}; modules: {', '.join(TOP_LEVEL_MODULES)}")
    print(f"modules: {len(graph)}")
    print(f"edges: {sum(len(targets) for targets in graph.values())}")
    print(f"cycles: {len(found)}")
    for number, component in enumerate(found, 1):
        print(f"  cycle {number} ({len(component)} modules): {', '.join(component)}")
    upward = upward_imports(graph)
    print(f"upward imports (tools/layers.py): {len(upward)}")
    for module, target in upward:
        print(f"  {module} -> {target}")
    if args.edges:
        for module in sorted(graph):
            for target in sorted(graph[module]):
                print(f"{module} -> {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
