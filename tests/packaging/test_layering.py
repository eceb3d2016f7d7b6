"""The import layering the project promises, checked on the source: imports go one way.

The layers are parts of the `specsuite` package (`layer_of`): the harness (everything under `specsuite/` but
the parts below), the reference server (`specsuite/refserver/`), the shared kernel loader
(`specsuite/kernel_loading/`), the renderers (`specsuite/reports/`), the data the project makes
(`specsuite/fixtures/`), the pytest plugin (`specsuite/pytest_plugin/`) and the suites (`suites/`, installed as
`specsuite.suites`); the root error (`specsuite.errors`) sits below them all.

- the harness never imports pytest, the pytest plugin, the suites or the fixtures (their data is reached by
  path, specsuite.project_paths); only its command line (`specsuite.cli`) calls the renderers;
- the reference server is reached from the harness in two ways only: launched as a process
  (`python -m specsuite.refserver`, the argv built by specsuite/server/refserver_contract.py), or, in this
  process, through that contract module (serve-reference, its model folder, its numpy sampler for the kernel
  suite, the counters and A/B metrics only it has); no other harness module imports it;
- the reference server and the kernel loader never import the harness, the plugin, the suites, the renderers
  or pytest; the kernel loader imports nothing of the project but the root error, so the harness and the
  reference server load SGLang's sampler kernel through one loader;
- the renderers read results only: nothing of the project but the typed results model
  (the package `specsuite.results.types`, whose modules import nothing of the project but each other) and the
  root error, nor pytest;
- the server layer (`specsuite.server`, every server kind's folder included) imports no workload family, nor the
  analysis, the run's session, the orchestration, the command line or the pytest plugin: a kind's integrity rules and
  bench stream reader need only what the server layer holds, and the families reach the kinds through the registry;
- no import cycle anywhere in the project (`specsuite/`, `suites/`, conftest.py);
- imports go down the layer order (tools/layers.py, bottom to top): errors < foundation (project_paths, stats,
  the results model, kernel_loading) < the reference server and its fixtures < server (kinds included; the
  results writer) < options (the option class and the generic options, specsuite.config) < compare (building
  blocks) < kernels < families < analysis < sessions (history, session, orchestration, reports) < front ends (cli,
  pytest_plugin) < suites; a module imports its own layer or those below, never one above.

Every import counts wherever it sits (module level or inside a function: a lazy import closes a
cycle as surely as a top-level one once both functions run), and so do relative imports and modules
loaded by name (`importlib.import_module`, `importlib.resources.files`).  The reader and the graph
are tools/import_graph.py's, which prints the same graph for people.
"""

from __future__ import annotations

from pathlib import Path

from tools.import_graph import build_graph, cycles, imports_of, read_imports
from tools.layers import LAYERS, layer_index, upward_imports

CONTRACT = "specsuite.server.refserver_contract"
RESULTS_MODEL = "specsuite.results.types"  # the typed results model (a package): what "reads results" reads
ROOT_ERROR = "specsuite.errors"
# specsuite's parts that are layers of their own; the rest of specsuite is the harness.
PARTS = ("refserver", "kernel_loading", "reports", "fixtures", "pytest_plugin", "suites")


def layer_of(name: str) -> str | None:
    """The layer a module name belongs to: `errors`, a part of PARTS, `harness`, `suites`, `pytest`, `tools`;
    None for a module that is not the project's (nor pytest)."""
    top, _, rest = name.partition(".")
    if top in ("pytest", "_pytest"):
        return "pytest"
    if top in ("suites", "tools"):
        return top
    if top != "specsuite":
        return None
    if name == ROOT_ERROR or name.startswith(ROOT_ERROR + "."):
        return "errors"
    part = rest.partition(".")[0]
    return part if part in PARTS else "harness"


IMPORTS = read_imports()


def _offenders(layer: str, forbidden: set[str], allowed_modules: frozenset[str] = frozenset()) -> dict[str, list[str]]:
    """Module -> the names of forbidden layers it imports, for every module of `layer`."""
    found = {module: sorted(name for name in names if layer_of(name) in forbidden)
             for module, names in IMPORTS.items() if layer_of(module) == layer and module not in allowed_modules}
    return {module: names for module, names in found.items() if names}


def test_every_layer_is_read():
    assert {layer_of(module) for module in IMPORTS} >= {"harness", "errors", *PARTS}


def test_harness_imports_no_test_framework_or_suites_and_only_its_cli_renders():
    assert not _offenders("harness", {"pytest", "pytest_plugin", "suites", "fixtures"})
    cli = frozenset(module for module in IMPORTS if module.startswith("specsuite.cli"))
    assert not _offenders("harness", {"reports"}, allowed_modules=cli)


def test_only_the_contract_module_imports_the_reference_server():
    assert not _offenders("harness", {"refserver"}, allowed_modules=frozenset({CONTRACT}))
    assert any(layer_of(name) == "refserver" for name in IMPORTS[CONTRACT])  # the rule is live


def test_reference_server_and_kernel_loader_never_import_the_harness_suites_reports_or_pytest():
    forbidden = {"pytest", "harness", "pytest_plugin", "suites", "reports"}
    assert not _offenders("refserver", forbidden)
    assert not _offenders("kernel_loading", forbidden | {"refserver", "fixtures", "tools"})


def test_reports_read_results_only():
    def is_results_model(name: str) -> bool:
        return name == RESULTS_MODEL or name.startswith(RESULTS_MODEL + ".")

    found = _offenders("reports", {"pytest", "harness", "pytest_plugin", "suites", "fixtures", "refserver", "kernel_loading"})
    assert not {module: names for module, names in found.items() if not all(map(is_results_model, names))}
    model = [module for module in IMPORTS if is_results_model(module)]
    assert len(model) > 1  # the package and its modules
    assert not {name for module in model for name in IMPORTS[module] if layer_of(name) is not None and not is_results_model(name)}


ABOVE_THE_SERVER = ("specsuite.families", "specsuite.analysis", "specsuite.session", "specsuite.orchestration", "specsuite.cli",
                    "specsuite.pytest_plugin", "suites")


def test_the_server_layer_kinds_included_imports_nothing_above_it():
    def above(name: str) -> bool:
        return any(name == part or name.startswith(part + ".") for part in ABOVE_THE_SERVER) or layer_of(name) == "pytest"

    server = {module: names for module, names in IMPORTS.items() if module == "specsuite.server" or module.startswith("specsuite.server.")}
    assert "specsuite.server.kinds.sglang.integrity_rules" in server and "specsuite.server.kinds.vllm.bench_stream" in server  # the rule is live
    found = {module: sorted(filter(above, names)) for module, names in server.items()}
    assert not {module: names for module, names in found.items() if names}


def test_no_import_cycle_anywhere_lazy_imports_included():
    assert "conftest" in IMPORTS
    found = cycles(build_graph(IMPORTS))
    assert not found, "import cycles: " + "; ".join(" <-> ".join(component) for component in found)




def test_every_module_has_a_layer():
    assert not [module for module in IMPORTS if layer_index(module) is None]
    assert [name for name, _ in LAYERS][:2] == ["errors", "foundation"] and LAYERS[-1][0] == "suites"


def test_no_module_imports_a_higher_layer_lazy_imports_included():
    found = set(upward_imports(build_graph(IMPORTS)))
    assert not found, "upward imports: " + "; ".join(f"{module} -> {target}" for module, target in sorted(found))


def test_an_upward_import_is_found_at_any_depth(tmp_path):
    # A results model that reads a family's records (a lazy import) goes up three layers; the family reading the model does not.
    _write(tmp_path, {"specsuite/__init__.py": "", "specsuite/results/__init__.py": "", "specsuite/families/__init__.py": "",
                      "specsuite/results/types.py": "def later():\n    from specsuite.families import records\n",
                      "specsuite/families/records.py": "from specsuite.results.types import later\n"})
    graph = build_graph(read_imports(tmp_path, packages=("specsuite",), top_level=()))
    assert upward_imports(graph) == [("specsuite.results.types", "specsuite.families.records")]
    assert layer_index("specsuite.results.store") > layer_index("specsuite.results.types")  # the writer sits with the server


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_reader_sees_relative_lazy_and_by_name_imports(tmp_path):
    _write(tmp_path, {"specsuite/__init__.py": "", "specsuite/sub/__init__.py": "",
                      "specsuite/sub/mod.py": "from . import sibling\nfrom ..other import thing\nimport importlib\n"
                                            "importlib.import_module('refserver')\nfrom importlib import resources\n"
                                            "resources.files('specsuite.fixtures.data')\n\n\ndef later():\n    import pytest\n"
                                            "    from specsuite.refserver.cli import main\n"})
    assert set(imports_of(tmp_path / "specsuite/sub/mod.py", tmp_path)) >= {
        "specsuite.sub.sibling", "specsuite.other.thing", "refserver", "specsuite.fixtures.data", "pytest", "specsuite.refserver.cli.main"}


def test_a_cycle_closed_by_a_function_level_import_is_found(tmp_path):
    _write(tmp_path, {"specsuite/refserver/__init__.py": "", "specsuite/refserver/a.py": "from specsuite.refserver.b import helper\n",
                      "specsuite/refserver/b.py": "def helper():\n    from specsuite.refserver import a\n    return a\n",
                      "specsuite/refserver/c.py": "import specsuite.refserver.a\n"})
    graph = build_graph(read_imports(tmp_path, packages=("specsuite",), top_level=()))
    assert graph["specsuite.refserver.b"] == {"specsuite.refserver.a"}
    assert cycles(graph) == [["specsuite.refserver.a", "specsuite.refserver.b"]]
    (tmp_path / "specsuite/refserver/b.py").write_text("def helper():\n    return None\n")  # the lazy import gone: no cycle
    assert cycles(build_graph(read_imports(tmp_path, packages=("specsuite",), top_level=()))) == []
