"""Results model (v2 shape, now v3): every writer keeps arms as repeats, and recorded version-1 files still load.

`tests/data/results_v1/pytest_session.json` was written by a pytest session of the version-1 code
(`pytest suites -m correctness --temperatures 0,1.0 --top-p 1.0`, 2026-12-04);
`tests/data/ab_results/nofix_vs_fix_smoke.json` by `specsuite run` of the version-1 code.
"""

from __future__ import annotations

import json
from pathlib import Path

from specsuite.analysis.verdicts import compare_arms
from specsuite.history.ingest import items_from_file
from specsuite.reports.document import ANALYSIS_KEY as REPORTS_ANALYSIS_KEY
from specsuite.reports.render import render_report
from specsuite.results import builder, model
from specsuite.results.store import load_results
from specsuite.results.types import Document, Workloads

DATA = Path(__file__).parents[1] / "data"
V1_SESSION = DATA / "results_v1" / "pytest_session.json"
V1_RUN = DATA / "ab_results" / "nofix_vs_fix_smoke.json"


def test_a_recorded_v1_pytest_session_loads_as_one_repeat_of_its_arm():
    raw = json.loads(V1_SESSION.read_text())
    assert raw["schema_version"] == 1 and "cases" in raw["arms"]["fix"]
    loaded = load_results(V1_SESSION).to_dict()
    assert loaded["schema_version"] == model.SCHEMA_VERSION and loaded["upgraded_from"] == 1
    arm = loaded["arms"]["fix"]
    assert "cases" not in arm and "workloads" not in arm
    (repeat,) = arm["repeats"]
    assert repeat["repeat"] == 1 and repeat["seed"] == raw["seed"]
    assert repeat["cases"] == raw["arms"]["fix"]["cases"] and repeat["workloads"] == raw["arms"]["fix"]["workloads"]
    assert arm["identity"] == raw["arms"]["fix"]["identity"]  # arm-level facts stay where they were


def test_a_recorded_v1_run_keeps_its_repeats_and_reads_the_same():
    raw = json.loads(V1_RUN.read_text())
    loaded = load_results(V1_RUN)
    assert loaded.upgraded_from == 1
    assert loaded.to_dict()["arms"] == raw["arms"]  # `specsuite run` already wrote repeats in version 1
    assert compare_arms(loaded).to_dict()["comparisons"] == compare_arms(Document.from_dict(raw)).to_dict()["comparisons"]


def test_v1_files_feed_the_history_and_the_report(tmp_path):
    (item,) = items_from_file(V1_SESSION)
    assert item.run.repeats == 1 and item.run.results_schema_version == model.SCHEMA_VERSION
    results = load_results(V1_RUN)
    results.put(model.ANALYSIS_KEY, compare_arms(results).to_dict())  # as results.json holds it
    written = render_report(results, tmp_path)
    assert written and all(Path(path).exists() for path in written)


def test_upgrade_leaves_a_current_document_alone():
    current = {"schema_version": model.SCHEMA_VERSION, "arms": {"fix": {"repeats": [builder.session_repeat([], Workloads(), 0).to_dict()]}}}
    assert model.upgrade(current) is current


def test_the_renderers_read_the_models_analysis_key():
    assert REPORTS_ANALYSIS_KEY == model.ANALYSIS_KEY


def test_comparisons_built_in_memory_use_the_models_shape():
    repeat = builder.session_repeat([], Workloads(), 0)
    document = builder.comparison_of({"base": [repeat], "cand": [repeat, repeat]}, "base")
    assert document.schema_version == model.SCHEMA_VERSION
    assert document.arm_order == ["cand", "base"] and document.baseline_arm == "base"
    written = document.to_dict()
    assert len(document.arms["cand"].repeats) == 2 and model.upgrade(written) == written
