"""The nightly history on SQLite: ingestion, schema versioning, comparability, baselines, trends,
rendering and the `specsuite history` command.  Nights are synthetic session results.json dicts
(seeded draws from tests/helpers/ab_results.make_case)."""

from __future__ import annotations

import argparse
import copy
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from specsuite.cli import history as history_command
from specsuite.errors import SpecsuiteError
from specsuite.history import (
    HistoryStore,
    analyse,
    compare_case,
    config_from_identity,
    config_key,
    items_from_file,
    items_from_results,
    parse_compare_to,
    resolve_baseline,
)
from specsuite.history import baseline as baseline_module
from specsuite.history import metrics as metrics_module
from specsuite.history.backends import mask_url, sqlite_path
from specsuite.history.schema import MIGRATIONS, SCHEMA_VERSION
from specsuite.reports.trends import render_trends
from specsuite.results.model import upgraded_document
from specsuite.results.types import ArmIdentity, Case
from tests.helpers.ab_results import CASES, make_case, nofix_vs_fix

IDENTITY = {
    "base_url": "http://node-a:30000", "model_path": "/models/qwen3", "served_model_name": "qwen3", "version": "0.5.23",
    "tokenizer_length": 8100, "vocab_size": 8128, "cuda_graph": "on",
    "speculative": {"speculative_algorithm": "EAGLE", "speculative_num_steps": 5, "speculative_eagle_topk": 1,
                    "speculative_num_draft_tokens": 6, "speculative_use_rejection_sampling": True},
    "server_args": {"tp_size": 1, "dp_size": 1, "refserver_arm": "fix", "launch_command": "python -m sglang.launch_server ..."},
    "extra": {"arm": "nightly"},
}


def night(number: int, *, invalid_rate: float = 0.0, accept_mean: float = 2.4, identity: dict | None = None,
          status: str = "complete", profile: str = "smoke") -> dict[str, Any]:
    """One nightly session's results.json: every case of CASES, seeded by the night number.

    The bug's rates and acceptance apply to sampled cases only: greedy decoding never samples."""
    rng = np.random.default_rng(number)
    cases = [make_case(rng, t, p, invalid_rate=invalid_rate, accept_mean=accept_mean if t > 0 else 2.4) for t, p in CASES]
    return {"schema_version": 1, "created_utc": f"2025-03-{number:02d}T02:00:00Z", "specsuite_version": "0.1.0",
            "run_id": f"night-{number:02d}", "status": status, "seed": number, "profile": profile, "command": "pytest suites/",
            "arms": {"nightly": {"identity": identity or IDENTITY, "vocab": {}, "cases": cases, "workloads": {}}}}


def store_nights(store: HistoryStore, nights: list[dict[str, Any]], *, accelerator: str = "MI355X") -> list[int]:
    ids = []
    for results in nights:
        passed = all(c["detectors"]["invalid_id"]["count"] == 0 for c in results["arms"]["nightly"]["cases"])
        for item in items_from_results(upgraded_document(results), outcome="passed" if passed else "failed", build_hash=f"b{results['seed']}",
                                       accelerator=accelerator):
            ids.append(store.add(item).id)
    return ids


def regressed_series(nights: int = 10, regress_from: int = 7) -> list[dict[str, Any]]:
    return [night(n, invalid_rate=0.015 if n >= regress_from else 0.0, accept_mean=4.2 if n >= regress_from else 2.4)
            for n in range(1, nights + 1)]


@pytest.fixture
def store(tmp_path):
    with HistoryStore.open(str(tmp_path / "history.sqlite")) as opened:
        yield opened


# ---------------------------------------------------------------- store and schema


def test_run_and_metrics_round_trip(store):
    results = night(1)
    [item] = items_from_results(upgraded_document(results), outcome="passed", build_hash="abc123", accelerator="MI355X")
    stored = store.add(item)
    assert stored.created
    [run] = store.runs()
    assert (run.id, run.arm, run.build_hash, run.accelerator, run.outcome, run.profile) == (stored.id, "nightly", "abc123", "MI355X", "passed", "smoke")
    assert (run.model, run.server_version, run.started_utc, run.config["accelerator"]) == ("qwen3", "0.5.23", "2025-03-01T02:00:00Z", "MI355X")
    metrics = {(m.name, m.case_id): m for m in store.metrics_by_run([run.id])[run.id]}
    case = results["arms"]["nightly"]["cases"][1]
    fragments = metrics[("fragment_excess", case["case_id"])]
    assert (fragments.k, fragments.n) == (case["detectors"]["fragment_id"]["count"], case["n_tokens"])
    assert fragments.samples == [{"repeat": 1, "events": fragments.k, "exposure": fragments.n}]
    accept = metrics[("accept_length", case["case_id"])]
    assert accept.samples[0]["values"] == pytest.approx(case["acceptance"]["per_request"])
    assert accept.value == pytest.approx(np.mean(case["acceptance"]["per_request"])) and accept.ci_low < accept.value < accept.ci_high
    assert accept.direction == "either" and metrics[("invalid_ids", case["case_id"])].direction == "lower"
    assert store.document(run.id).to_dict()["repeats"][0]["cases"] == results["arms"]["nightly"]["cases"]


def test_the_same_run_is_stored_once(store):
    [item] = items_from_results(upgraded_document(night(1)), outcome="passed")
    first, second = store.add(item), store.add(item)
    assert first.created and not second.created and first.id == second.id
    assert len(store.runs()) == 1
    next_night = night(2)
    next_night["run_id"] = "night-01"  # a job that reuses one --run-id every night
    [item] = items_from_results(upgraded_document(next_night), outcome="passed")
    assert store.add(item).created and len(store.runs()) == 2


def test_sqlite_store_is_wal_and_versioned(tmp_path):
    path = tmp_path / "h.sqlite"
    HistoryStore.open(str(path)).close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert [row[0] for row in conn.execute("SELECT version FROM schema_migrations")] == list(range(1, SCHEMA_VERSION + 1))
    HistoryStore.open(f"sqlite:///{path}").close()  # reopening applies nothing twice


def test_migrations_are_numbered_in_order():
    assert [m.version for m in MIGRATIONS] == list(range(1, SCHEMA_VERSION + 1))


def test_database_from_a_newer_specsuite_is_refused(tmp_path):
    path = tmp_path / "h.sqlite"
    HistoryStore.open(str(path)).close()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO schema_migrations VALUES (?, 'future', '2030-01-01T00:00:00Z')", (SCHEMA_VERSION + 1,))
    with pytest.raises(SpecsuiteError, match=f"schema version {SCHEMA_VERSION + 1}, newer"):
        HistoryStore.open(str(path))


def test_results_db_urls():
    assert sqlite_path("sqlite:////var/lib/h.sqlite") == Path("/var/lib/h.sqlite")
    assert sqlite_path("sqlite:///rel/h.sqlite") == Path("rel/h.sqlite")
    assert sqlite_path("history.sqlite") == Path("history.sqlite")
    assert sqlite_path("postgresql://u:pw@db:5432/specsuite") is None
    with pytest.raises(SpecsuiteError, match="unsupported results database URL 'mysql://u:\\*\\*\\*@db/x'"):
        sqlite_path("mysql://u:secret@db/x")
    assert mask_url("postgresql://u:secret@db:5432/x") == "postgresql://u:***@db:5432/x"


@pytest.mark.parametrize("env", ["sqlite:////data/h.sqlite", None])
def test_results_db_has_the_same_default_under_pytest_and_the_cli(monkeypatch, env):
    """`--results-db` defaults to SPECSUITE_RESULTS_DB under `specsuite history` (and its verbs) and under pytest."""
    from _pytest.config.argparsing import Parser

    from specsuite.cli.main import build_parser
    from specsuite.pytest_plugin import history as plugin_history

    if env is None:
        monkeypatch.delenv(history_command.RESULTS_DB_ENV, raising=False)
    else:
        monkeypatch.setenv(history_command.RESULTS_DB_ENV, env)
    cli = [build_parser().parse_args(argv).results_db for argv in (["history"], ["history", "list"], ["history", "ingest", "r.json"])]
    parser = Parser(_ispytest=True)
    plugin_history.pytest_addoption(parser)
    assert cli == [env, env, env]
    assert parser.parse([]).results_db == env
    assert build_parser().parse_args(["history", "list", "--results-db", "x.sqlite"]).results_db == "x.sqlite"


def test_a_folder_is_not_a_database(tmp_path):
    with pytest.raises(SpecsuiteError, match="must name a file"):
        HistoryStore.open(str(tmp_path))


# ---------------------------------------------------------------- ingestion


def test_unfinished_or_unidentified_runs_are_refused():
    with pytest.raises(SpecsuiteError, match="status 'running'"):
        items_from_results(upgraded_document(night(1, status="running")))
    with pytest.raises(SpecsuiteError, match="no arm other"):
        items_from_results(upgraded_document(night(1)), arms=["other"])
    anonymous = night(1)
    anonymous["arms"]["nightly"]["identity"] = {}
    with pytest.raises(SpecsuiteError, match="no server identity"):
        items_from_results(upgraded_document(anonymous))
    with pytest.raises(SpecsuiteError, match="YYYY-MM-DD"):
        items_from_results(upgraded_document(night(1)), date="yesterday")


def test_specsuite_run_file_gives_one_run_per_arm_with_its_outcome(tmp_path):
    results = nofix_vs_fix(seed=1, repeats=2)
    results["created_utc"] = "2025-03-01T02:00:00Z"
    items = items_from_results(upgraded_document(results))
    assert [(i.run.arm, i.run.repeats, i.run.outcome) for i in items] == [("nofix", 2, "passed"), ("fix", 2, "passed")]
    results["arms"]["nofix"]["repeats"][1]["exit_code"] = 1
    assert items_from_results(upgraded_document(results), arms=["nofix"])[0].run.outcome == "failed"
    path = tmp_path / "results.json"
    path.write_bytes(orjson.dumps(results))
    [item] = items_from_file(tmp_path, arms=["fix"], date="2025-03-04")
    assert item.run.started_utc == "2025-03-04T00:00:00Z" and item.run.source_path == str(path.resolve())


def test_config_key_ignores_the_build_and_keeps_the_configuration():
    base = config_key(config_from_identity(ArmIdentity.from_dict(IDENTITY), profile="smoke", accelerator="MI355X"))
    rebuilt = copy.deepcopy(IDENTITY)
    rebuilt.update(version="0.5.24", base_url="http://node-b:30000")
    rebuilt["server_args"].update(refserver_arm="nofix", launch_command="other")
    assert config_key(config_from_identity(ArmIdentity.from_dict(rebuilt), profile="smoke", accelerator="MI355X")) == base
    other_draft = copy.deepcopy(IDENTITY)
    other_draft["speculative"]["speculative_num_draft_tokens"] = 8
    for identity, profile, accelerator in ((other_draft, "smoke", "MI355X"), (IDENTITY, "nightly", "MI355X"), (IDENTITY, "smoke", "H200")):
        assert config_key(config_from_identity(ArmIdentity.from_dict(identity), profile=profile, accelerator=accelerator)) != base


# ---------------------------------------------------------------- baselines


def test_last_good_is_the_newest_passed_run_of_the_configuration(store):
    ids = store_nights(store, [night(1), night(2), night(3, invalid_rate=0.02)])
    store_nights(store, [night(4)], accelerator="H200")
    key = store.run(ids[0]).config_key
    assert store.last_good(key, "nightly").id == ids[1]
    assert store.last_good(key, "other-arm") is None


def test_compare_to_a_run_of_another_configuration_is_refused(store):
    [run_id] = store_nights(store, [night(1)], accelerator="H200")
    tonight = config_from_identity(ArmIdentity.from_dict(IDENTITY), profile="smoke", accelerator="MI355X")
    with pytest.raises(SpecsuiteError, match="refusing to compare.*accelerator: 'H200' vs 'MI355X'"):
        resolve_baseline(store, run_id, config_key=config_key(tonight), config=tonight, arm="nightly")
    assert resolve_baseline(store, "last-good", config_key=config_key(tonight), config=tonight, arm="nightly") is None
    with pytest.raises(SpecsuiteError, match="last-good"):
        parse_compare_to("yesterday")


def test_tonight_against_the_baseline_flags_the_injected_regression(store):
    store_nights(store, [night(1)])
    tonight = config_from_identity(ArmIdentity.from_dict(IDENTITY), profile="smoke", accelerator="MI355X")
    baseline = resolve_baseline(store, "last-good", config_key=config_key(tonight), config=tonight, arm="nightly")
    sampled = night(2, invalid_rate=0.015)["arms"]["nightly"]["cases"][2]
    worse = {row.metric for row in compare_case(baseline, Case.from_dict(sampled), alpha=0.001).worse}
    assert {"invalid_ids", "fallback_ids", "stray_per_1200"} <= worse
    healthy = night(3)["arms"]["nightly"]["cases"][2]
    assert compare_case(baseline, Case.from_dict(healthy), alpha=0.001).worse == []


def test_a_metric_whose_definition_changed_is_not_compared(store, monkeypatch):
    store_nights(store, [night(1)])
    tonight = config_from_identity(ArmIdentity.from_dict(IDENTITY), profile="smoke", accelerator="MI355X")
    baseline = resolve_baseline(store, "last-good", config_key=config_key(tonight), config=tonight, arm="nightly")
    monkeypatch.setitem(baseline_module.METRIC_VERSIONS, "invalid_ids", 2)
    comparison = compare_case(baseline, Case.from_dict(night(2, invalid_rate=0.015)["arms"]["nightly"]["cases"][2]), alpha=0.001)
    assert comparison.skipped == ["invalid_ids: stored as version 1, now version 2"]
    assert "invalid_ids" not in {row.metric for row in comparison.rows}
    assert "fallback_ids" in {row.metric for row in comparison.worse}


# ---------------------------------------------------------------- trends


def test_ten_nights_flag_night_seven_and_nothing_else(store):
    store_nights(store, regressed_series())
    trends = analyse(store)
    assert {step.night for step in trends.steps} == {7}
    flagged = {(step.metric, step.kind) for step in trends.regressions}
    assert {("invalid_ids", "regression"), ("stray_per_1200", "regression"), ("accept_length", "change")} <= flagged
    assert all(step.open for step in trends.regressions)
    assert all(step.case_id != "t=0-top_p=1" for step in trends.steps)  # greedy decoding never samples


def test_one_noisy_night_raises_no_alarm(store):
    nights = [night(n, invalid_rate=0.02 if n == 5 else 0.0) for n in range(1, 11)]
    store_nights(store, nights)
    assert analyse(store).steps == []


def test_a_metric_version_change_splits_the_trend(store, monkeypatch):
    store_nights(store, [night(n) for n in range(1, 6)])
    monkeypatch.setitem(metrics_module.METRIC_VERSIONS, "accept_length", 2)
    store_nights(store, [night(n, accept_mean=4.2) for n in range(6, 11)])
    trends = analyse(store)
    accept = [t for t in trends.series[0].trends if t.metric == "accept_length" and t.case_id == "t=1-top_p=1"][0]
    assert [change.to_dict() for change in accept.version_changes] == [{"position": 5, "from": 1, "to": 2}]
    assert accept.steps == []  # 2.4 -> 4.2 sits on the version boundary: never tested across it
    assert {s.metric for s in trends.steps} <= {"invalid_ids"}  # nothing else moved


def test_configurations_are_separate_series(store):
    store_nights(store, regressed_series(6, regress_from=99))
    store_nights(store, [night(n) for n in range(11, 14)], accelerator="H200")
    trends = analyse(store)
    assert [(s.accelerator, s.nights) for s in trends.series] == [("MI355X", 6), ("H200", 3)]
    assert trends.series[1].differs_from_first == ["accelerator: 'MI355X' vs 'H200'"]
    assert analyse(store, accelerator="H200").series[0].nights == 3


def test_render_writes_a_figure_per_metric_and_the_list(store, tmp_path):
    store_nights(store, regressed_series())
    typed = analyse(store, metrics=["invalid_ids", "accept_length"])  # two figures keep the test fast
    written = render_trends(typed, tmp_path / "out")
    trends = typed.to_dict()
    figures = trends["series"][0]["figures"]
    assert set(figures) == {"invalid_ids", "accept_length"}
    assert all((tmp_path / "out" / path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for path in figures.values())
    markdown = (tmp_path / "out" / "regressions.md").read_text()
    assert f"## Regressions ({len(trends['regressions'])}, {len(trends['open_regressions'])} open)" in markdown
    assert "| invalid ids | t=1-top_p=1 |" in markdown and "night 7 (b7," in markdown
    assert tmp_path / "out" / "regressions.md" in written


# ---------------------------------------------------------------- the command


def _cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="specsuite")
    history_command.add_parser(parser.add_subparsers(dest="command", required=True))
    return history_command.run(parser.parse_args(list(argv)))


def test_history_command_ingests_lists_and_renders(tmp_path, capsys):
    db = f"sqlite:///{tmp_path / 'h.sqlite'}"
    files = []
    for results in regressed_series():
        path = tmp_path / results["run_id"] / "results.json"
        path.parent.mkdir()
        path.write_bytes(orjson.dumps(results))
        files.append(str(path))
    assert _cli("history", "ingest", *files[:6], "--results-db", db, "--accelerator", "MI355X", "--outcome", "passed") == 0
    assert _cli("history", "--results-db", db, "ingest", *files[6:], "--accelerator", "MI355X", "--outcome", "failed") == 0
    assert _cli("history", "ingest", files[0], "--results-db", db, "--accelerator", "MI355X") == 0
    assert "already stored as run 1" in capsys.readouterr().out
    assert _cli("history", "list", "--results-db", db, "--latest", "2") == 0
    listing = capsys.readouterr().out
    assert "night-09" in listing and "night-10" in listing and "night-08" not in listing
    assert _cli("history", "--results-db", db, "--out", str(tmp_path / "report"), "--metric", "invalid_ids") == 1  # open regressions
    out = capsys.readouterr().out
    assert "open regression: invalid ids at t=1-top_p=1 from night 7" in out
    saved = orjson.loads((tmp_path / "report" / "regressions.json").read_bytes())
    assert {step["night"] for step in saved["open_regressions"]} == {7}
    assert (tmp_path / "report" / "trends.json").is_file()
    assert _cli("history", "--results-db", db, "--out", str(tmp_path / "late"), "--latest", "3", "--metric", "invalid_ids") == 0  # too few nights


@pytest.mark.parametrize("argv, message", [
    (("history", "--results-db", "sqlite:///{tmp}/h.sqlite"), "needs --out"),
    (("history", "--results-db", "mysql://db/x", "--out", "{tmp}/o"), "unsupported results database URL"),
    (("history", "--results-db", "sqlite:///{tmp}/h.sqlite", "--out", "{tmp}/o"), "no stored runs"),
    (("history", "--results-db", "sqlite:///{tmp}/h.sqlite", "--out", "{tmp}/o", "--metric", "speed"), "unknown metric speed"),
    (("history", "ingest", "{tmp}/missing.json", "--results-db", "sqlite:///{tmp}/h.sqlite"), "cannot read results file"),
])
def test_history_command_errors_are_one_line(tmp_path, argv, message):
    with pytest.raises(SpecsuiteError, match=message):
        _cli(*(arg.replace("{tmp}", str(tmp_path)) for arg in argv))



def test_history_list_of_nothing_says_so_in_one_line(tmp_path, capsys):
    """Before: an empty table's header, right after `specsuite history` said no stored runs match."""
    assert _cli("history", "list", "--results-db", f"sqlite:///{tmp_path / 'h.sqlite'}", "--arm", "candidate") == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("specsuite: no stored runs match in ") and "| id |" not in out[0], out
