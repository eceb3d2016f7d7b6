"""The import layering the project promises, checked on the source: imports go one way.

- `harness/` never imports pytest or `suites/`; only its command line (`harness.cli`) calls the
  renderers of `reports/`; it imports nothing of `fixtures/` (the fixtures' data is reached by path,
  harness.project_paths);
- the reference server (`refserver/`) is reached from the harness in two ways only: launched as a
  process (`python -m refserver`, the argv built by harness/server/refserver_contract.py), or, in
  this process, through that contract module (serve-reference, its model folder, its numpy sampler
  for the kernel suite, the counters and A/B metrics only it has); no other harness module imports it;
- `refserver/` and the shared kernel loader (`kernel_loading/`) never import `harness/`, `suites/`,
  `reports/` or pytest; `kernel_loading/` imports nothing of the project outside itself, so the
  harness and the reference server load SGLang's sampler kernel through one loader;
- `reports/` reads results only: it imports nothing of `harness/` but the typed results model
  (`harness.results.types`, which imports nothing of the project), nor of `suites/`, `fixtures/`,
  `refserver/`, `kernel_loading/` or pytest;
- no import cycle anywhere in the project (harness, fixtures, refserver, kernel_loading, reports,
  suites, conftest.py).

Every import counts wherever it sits (module level or inside a function: a lazy import closes a
cycle as surely as a top-level one once both functions run), and so do relative imports and modules
loaded by name (`importlib.import_module`, `importlib.resources.files`).  The reader and the graph
are tools/import_graph.py's, which prints the same graph for people.
"""

from __future__ import annotations

from pathlib import Path

from tools.import_graph import PACKAGES, build_graph, cycles, imports_of, read_imports

CONTRACT = "harness.server.refserver_contract"
PYTEST = {"pytest", "_pytest"}


def _top(name: str) -> str:
    return name.partition(".")[0]


def _offenders(package: str, forbidden: set[str], allowed_modules: frozenset[str] = frozenset()) -> dict[str, list[str]]:
    """Module -> the forbidden top-level packages it imports, for every module of `package`."""
    found = {module: sorted(name for name in names if _top(name) in forbidden)
             for module, names in read_imports(packages=(package,), top_level=()).items() if module not in allowed_modules}
    return {module: names for module, names in found.items() if names}


def test_harness_imports_no_test_framework_or_suites_and_only_its_cli_renders():
    assert not _offenders("harness", PYTEST | {"suites", "fixtures"})
    cli = frozenset(module for module in read_imports(packages=("harness",), top_level=()) if module.startswith("harness.cli"))
    assert not _offenders("harness", {"reports"}, allowed_modules=cli)


def test_only_the_contract_module_imports_the_reference_server():
    assert not _offenders("harness", {"refserver"}, allowed_modules=frozenset({CONTRACT}))
    assert any(_top(name) == "refserver" for name in read_imports(packages=("harness",), top_level=())[CONTRACT])  # the rule is live


def test_reference_server_and_kernel_loader_never_import_the_harness_suites_reports_or_pytest():
    forbidden = PYTEST | {"harness", "suites", "reports"}
    assert not _offenders("refserver", forbidden)
    assert not _offenders("kernel_loading", forbidden | {"refserver", "fixtures", "tools"})


RESULTS_MODEL = "harness.results.types"  # the typed results model: what "reads results" reads (it imports nothing of the project)


def test_reports_read_results_only():
    def is_results_model(name: str) -> bool:
        return name == RESULTS_MODEL or name.startswith(RESULTS_MODEL + ".")

    found = _offenders("reports", PYTEST | {"harness", "suites", "fixtures", "refserver", "kernel_loading"})
    assert not {module: names for module, names in found.items() if not all(map(is_results_model, names))}
    assert not {_top(name) for name in read_imports(packages=("harness",), top_level=())[RESULTS_MODEL]} & (PYTEST | set(PACKAGES))


def test_no_import_cycle_anywhere_lazy_imports_included():
    imports = read_imports()
    assert {_top(module) for module in imports} >= set(PACKAGES) | {"conftest"}  # every package is read
    found = cycles(build_graph(imports))
    assert not found, "import cycles: " + "; ".join(" <-> ".join(component) for component in found)


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_reader_sees_relative_lazy_and_by_name_imports(tmp_path):
    _write(tmp_path, {"harness/__init__.py": "", "harness/sub/__init__.py": "",
                      "harness/sub/mod.py": "from . import sibling\nfrom ..other import thing\nimport importlib\n"
                                            "importlib.import_module('refserver')\nfrom importlib import resources\n"
                                            "resources.files('fixtures.data')\n\n\ndef later():\n    import pytest\n"
                                            "    from refserver.cli import main\n"})
    assert set(imports_of(tmp_path / "harness/sub/mod.py", tmp_path)) >= {
        "harness.sub.sibling", "harness.other.thing", "refserver", "fixtures.data", "pytest", "refserver.cli.main"}


def test_a_cycle_closed_by_a_function_level_import_is_found(tmp_path):
    _write(tmp_path, {"refserver/__init__.py": "", "refserver/a.py": "from refserver.b import helper\n",
                      "refserver/b.py": "def helper():\n    from refserver import a\n    return a\n",
                      "refserver/c.py": "import refserver.a\n"})
    graph = build_graph(read_imports(tmp_path, packages=("refserver",), top_level=()))
    assert graph["refserver.b"] == {"refserver.a"}
    assert cycles(graph) == [["refserver.a", "refserver.b"]]
    (tmp_path / "refserver/b.py").write_text("def helper():\n    return None\n")  # the lazy import gone: no cycle
    assert cycles(build_graph(read_imports(tmp_path, packages=("refserver",), top_level=()))) == []
