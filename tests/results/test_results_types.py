"""The typed results model (schema version 3): recorded version-2 and version-1 files upgrade,
load typed down to cases, GSM8K runs, bench runs and comparison rows, and round-trip unchanged.

Recorded files (trimmed: lists cut to their first few entries, GSM8K per-question columns to 20; nothing else changed):
- `tests/data/results/v2_main_job.json`: `specsuite run --results-dir /tmp/b_results` of the
  version-2 code (c200c57, 2026-12-05), its `ab_compare` section left out (it is recomputed below);
- `tests/data/results/v2_pytest_session.json`: `pytest suites -m correctness --temperatures 0
  --top-p 1 --results-dir ...` of the same code;
- `tests/data/results_v1/pytest_session.json`: a version-1 pytest session (test_results_model.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specsuite.analysis.metrics import bench_results_document
from specsuite.analysis.verdicts import compare_arms
from specsuite.families.bench.records import BenchRun, bench_runs
from specsuite.families.gsm8k.records import Gsm8kRun, gsm8k_runs
from specsuite.results import builder, model
from specsuite.results.store import RunDirectory, load_results
from specsuite.results.types import SCHEMA_VERSION, Case, ComparisonRow, Document, KernelSection, Workloads

DATA = Path(__file__).parents[1] / "data"
V2_RUN = DATA / "results" / "v2_main_job.json"
V2_SESSION = DATA / "results" / "v2_pytest_session.json"
V1_SESSION = DATA / "results_v1" / "pytest_session.json"


@pytest.mark.parametrize("path", [V2_RUN, V2_SESSION, V1_SESSION], ids=["v2-run", "v2-session", "v1-session"])
def test_a_recorded_file_upgrades_to_version_3_and_loads_typed(path):
    raw = json.loads(path.read_text())
    assert raw["schema_version"] < SCHEMA_VERSION == 3
    document = load_results(path)
    assert document.schema_version == 3 and document.upgraded_from == raw["schema_version"]
    for arm in document.arms.values():
        assert arm.repeats and all(isinstance(case, Case) and case.case_id for case in arm.cases())
        assert arm.identity and arm.vocab
    case = next(iter(document.arms.values())).cases()[0]
    assert case.n_tokens > 0 and case.acceptance.per_request and case.detector("invalid_id") == 0


def test_version_2_upgrade_keeps_every_arm_as_it_was():
    raw = json.loads(V2_RUN.read_text())
    loaded = load_results(V2_RUN).to_dict()
    assert loaded["arms"] == raw["arms"]  # every recorded repeat already has its number, cases and workloads
    assert {key: value for key, value in loaded.items() if key not in ("schema_version", "upgraded_from")} == \
        {key: value for key, value in raw.items() if key != "schema_version"}


def test_version_2_repeats_without_cases_or_workloads_are_completed():
    # A version-2 benchmark comparison (specsuite.analysis.metrics before version 3) wrote repeats of
    # workloads only; a failed session's repeat could have neither.
    bench = {"completed": 4, "failed": 0, "median_itl_ms": 2.5}
    v2 = {"schema_version": 2, "arms": {"a": {"repeats": [{"repeat": 1, "workloads": {"bench": bench}}]},
                                        "b": {"repeats": [{"exit_code": 2, "error": "no server"}]}}}
    upgraded = model.upgrade(v2)
    assert upgraded["upgraded_from"] == 2 and v2["schema_version"] == 2  # the argument is not changed
    assert upgraded["arms"]["a"]["repeats"] == [{"repeat": 1, "workloads": {"bench": bench}, "cases": []}]
    assert upgraded["arms"]["b"]["repeats"] == [{"repeat": 1, "exit_code": 2, "error": "no server", "cases": [], "workloads": {}}]
    typed = Document.from_dict(upgraded)
    (run,) = bench_runs(typed.arms["a"].repeats[0].workloads)  # the bench family reads its raw part typed
    assert isinstance(run, BenchRun) and run.median_itl_ms == 2.5
    assert typed.arms["a"].repeats[0].workloads.part("bench") == bench  # the results model keeps it as written


def test_version_1_goes_through_version_2():
    raw = json.loads(V1_SESSION.read_text())
    upgraded = model.upgrade(raw)
    (repeat,) = upgraded["arms"]["fix"]["repeats"]
    assert upgraded["upgraded_from"] == 1 and set(repeat) >= {"repeat", "cases", "workloads"}


@pytest.mark.parametrize("path", [V2_RUN, V2_SESSION, V1_SESSION], ids=["v2-run", "v2-session", "v1-session"])
def test_load_save_round_trip_keeps_every_key(path, tmp_path):
    loaded = load_results(path).to_dict()
    assert Document.from_dict(loaded).to_dict() == loaded
    assert json.dumps(Document.from_dict(loaded).to_dict()) == json.dumps(loaded)  # key order too
    run = RunDirectory(tmp_path, run_id="again")
    run.write_results(load_results(path))
    again = load_results(run.results_path).to_dict()
    kept = ("created_utc", "specsuite_version", "run_id")
    assert {k: v for k, v in again.items() if k not in kept} == {k: v for k, v in loaded.items() if k not in kept}


def test_unknown_keys_survive_at_every_level():
    raw = {"schema_version": 3, "new_section": {"x": 1},
           "arms": {"a": {"new_arm_fact": 2, "repeats": [{"repeat": 1, "cases": [{"case_id": "c", "new_case_fact": [3]}],
                                                          "workloads": {"gsm8k": [{"new": 4}], "lossless": {"n": 5}}}]}}}
    document = Document.from_dict(raw)
    assert document.extra == {"new_section": {"x": 1}} and document.arms["a"].extra == {"new_arm_fact": 2}
    assert document.arms["a"].cases()[0].extra == {"new_case_fact": [3]}
    assert document.arms["a"].repeats[0].workloads.extra == {"gsm8k": [{"new": 4}], "lossless": {"n": 5}}
    assert gsm8k_runs(document.arms["a"].repeats[0].workloads)[0].extra == {"new": 4}
    assert document.to_dict() == raw


def test_a_value_of_an_unexpected_shape_is_kept_as_written():
    raw = {"schema_version": 3, "arms": {"a": {"repeats": "not a list"}}, "kernel": ["odd"]}
    document = Document.from_dict(raw)
    assert document.arms["a"].repeats == [] and document.kernel is None
    assert document.to_dict() == raw


def test_the_analysis_loads_as_comparison_rows():
    document = load_results(V2_RUN)
    analysis = compare_arms(document)
    document.put(model.ANALYSIS_KEY, analysis)
    assert document.analysis is document.ab_compare is analysis
    row = document.ab_compare.comparisons[0]
    assert isinstance(row, ComparisonRow) and row.candidate == "nofix" and row.baseline == "fix" and row.verdict
    assert document.to_dict()[model.ANALYSIS_KEY] == analysis.to_dict()
    assert Document.from_dict(document.to_dict()).ab_compare == analysis  # loads back as the same typed rows


def test_gsm8k_runs_are_typed_down_to_the_interval():
    document = load_results(V2_RUN)
    runs = [run for repeat in document.arms["fix"].repeats for run in gsm8k_runs(repeat.workloads)]
    assert runs and all(isinstance(run, Gsm8kRun) for run in runs)
    accuracy = runs[0].scoring("sglang").accuracy
    raw = json.loads(V2_RUN.read_text())["arms"]["fix"]["repeats"][0]["workloads"]["gsm8k"][0]["definitions"]["sglang"]["accuracy"]
    assert (accuracy.value, accuracy.k, accuracy.n, accuracy.ci_exact) == (raw["value"], raw["k"], raw["n"], raw["ci_exact"])


class _Described:
    def __init__(self, facts):
        self.facts = facts

    def to_dict(self):
        return dict(self.facts)


class _Server:
    server_under_test = {"source": "server-url", "reference_emulation": False}
    identity = _Described({"version": "0.5"})
    vocab = _Described({"vocab_size": 8})


def test_the_builder_writes_the_session_shape_every_front_end_shares():
    case = json.loads(V2_SESSION.read_text())["arms"]["fix"]["repeats"][0]["cases"][0]
    arm = builder.measured_arm(_Server(), [Case.from_dict(case)], Workloads.from_dict({"gsm8k": []}), 7)
    kernel = {"label": "k", "device": "cpu", "failing": []}
    document = builder.session_document(status="running", server_under_test=_Server.server_under_test, arms={"srv": arm}, seed=7,
                                        command="pytest suites", warnings=["w"], profile="smoke", sections={"kernel": kernel, "other": 1})
    written = document.to_dict()
    assert written["arms"]["srv"] == {"server_under_test": _Server.server_under_test, "identity": {"version": "0.5"},
                                      "vocab": {"vocab_size": 8},
                                      "repeats": [{"repeat": 1, "seed": 7, "cases": [case], "workloads": {"gsm8k": []}}]}
    assert written["kernel"] == kernel and written["other"] == 1 and isinstance(document.kernel, KernelSection)
    assert written["warnings"] == ["w"] and written["profile"] == "smoke" and written["seed"] == 7


def test_the_run_header_and_the_bench_comparison_come_from_the_builder():
    header = builder.run_document(embedded=True, seed=0, profile="smoke", repeats=2, markers=None, pytest_options=["-x"],
                                  command="specsuite run", arm_order=["nofix", "fix"]).to_dict()
    assert header["arms"] == {} and header["baseline_arm"] == "fix" and header["markers"] is None
    assert header["server_under_test"] == {"embedded_reference": True, "reference_emulation": True, "source": "embedded-reference"}
    bench = bench_results_document({"a": [{"completed": 1}], "b": [{"completed": 2}, {"completed": 3}]}, "a").to_dict()
    assert bench["arm_order"] == ["b", "a"] and bench["schema_version"] == SCHEMA_VERSION
    assert [r["workloads"]["bench"]["completed"] for r in bench["arms"]["b"]["repeats"]] == [2, 3]
    assert model.upgrade(bench) is bench  # already the version-3 shape


def test_the_typed_model_imports_nothing_of_the_project():
    # specsuite/reports/ reads these types (tests/packaging/test_layering.py allows exactly this package), so its
    # modules must not pull harness in behind them: nothing but the standard library and each other.
    import ast

    import specsuite.results.types as types_module

    for path in Path(types_module.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        assert {name for name in imported if not name.startswith("specsuite.results.types.")} <= {"__future__", "dataclasses", "typing"}, path


def test_a_session_document_keeps_the_keys_and_order_sessions_always_wrote():
    arm = builder.measured_arm(_Server(), [], Workloads(), 0)
    written = builder.session_document(status="complete", server_under_test={}, arms={"srv": arm}, seed=0, command="c",
                                       profile="smoke", sections={"kernel": {"label": "k"}}).to_dict()
    assert list(written) == ["status", "server_under_test", "warnings", "seed", "profile", "command", "arms", "kernel"]
    gsm8k_shaped = builder.session_document(status="running", server_under_test={}, arms={}, seed=None, command="c").to_dict()
    assert list(gsm8k_shaped) == ["status", "server_under_test", "warnings", "seed", "command", "arms"]
