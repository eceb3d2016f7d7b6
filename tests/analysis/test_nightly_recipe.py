"""The README's nightly recipe, run as written against two reference servers: a night whose candidate is the nofix arm
exits 1, a night whose candidate is the fix arm exits 0; the results database holds both nights; the trend plot exists.
docs/github-actions-nightly.yml carries the same script.

The block is taken from the README itself (so the README cannot drift from what CI runs) and run by bash with only
the variables it documents set: the two launch commands (`python -m specsuite.refserver ...`, a bare `python`: the sessions run
it with their own interpreter), the store, the night and a narrower grid (`-m correctness`, T=0 and T=1, top_p 1) to
keep CI's time small.  Both nights: 4 sessions, two at a time.
"""

from __future__ import annotations

import os
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from specsuite.orchestration.arms import free_ports
from specsuite.server.refserver_contract import SPECULATIVE_ARGS

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
WORKFLOW = ROOT / "docs" / "github-actions-nightly.yml"
HEADING = "## The nightly recipe"


def recipe() -> str:
    """The first ```sh block under the README's nightly heading."""
    text = README.read_text(encoding="utf-8")
    start = text.index("```sh\n", text.index(HEADING)) + len("```sh\n")
    return text[start:text.index("```\n", start)]


def test_the_workflow_runs_the_readme_recipe_verbatim() -> None:
    workflow = WORKFLOW.read_text(encoding="utf-8")
    step = workflow[workflow.index("run: |\n", workflow.index("name: nightly (the README's recipe)")) + len("run: |\n"):]
    lines = [line[10:] if line.startswith(" " * 10) else line for line in step.splitlines()]
    block = recipe().rstrip("\n").splitlines()
    assert lines[:len(block)] == block
    assert "mikepenz/action-junit-report" in workflow and "sessions/*.junit.xml" in workflow


def _night(tmp_path: Path, night: str, candidate_arm: str, ports: list[int]) -> subprocess.CompletedProcess[str]:
    reference = " ".join(SPECULATIVE_ARGS)
    env = dict(os.environ)
    env.pop("SPECSUITE_SERVER_URL", None)
    env.update(
        CANDIDATE=f"python -m specsuite.refserver --arm {candidate_arm} --port {ports[0]} {reference}",
        LAST_GOOD=f"python -m specsuite.refserver --arm fix --port {ports[1]} {reference}",
        SPECSUITE=f"{shlex.quote(sys.executable)} -m specsuite.cli.main",
        NIGHT=night, OUT=str(tmp_path), SPECSUITE_RESULTS_DB=f"sqlite:///{tmp_path / 'history.sqlite'}",
        SPECSUITE_ACCELERATOR="cpu-emulation", SPECSUITE_BUILD_HASH=f"refserver-{candidate_arm}",
        # CI's time: correctness only, one sampled case (and its T=0 control), the arms at once (timing is not judged here)
        NIGHTLY_ARGS="-m correctness --temperatures 0,1 --top-p 1 --no-report --arm-schedule side-by-side",
        PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p),
    )
    script = tmp_path / "nightly.sh"
    script.write_text(recipe(), encoding="utf-8")
    return subprocess.run(["bash", str(script)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_the_recipe_fails_a_broken_night_and_passes_a_correct_one(tmp_path: Path) -> None:
    ports = free_ports(2)
    broken = _night(tmp_path, "2026-12-05", "nofix", ports)
    out = broken.stdout + broken.stderr
    print(f"$ NIGHT=2026-12-05 CANDIDATE=<nofix> bash nightly.sh\n{out}exit {broken.returncode}\n")  # shown with -s
    assert broken.returncode == 1, out
    assert "specsuite: verdict: candidate · correctness: worse on invalid ids" in out
    assert "specsuite: absolute gate: candidate: fallback_ids" in out
    assert "exit 1: " in out and "Traceback" not in out

    correct = _night(tmp_path, "2026-12-06", "fix", ports)
    out = correct.stdout + correct.stderr
    print(f"$ NIGHT=2026-12-06 CANDIDATE=<fix> bash nightly.sh\n{out}exit {correct.returncode}\n")
    assert correct.returncode == 0, out
    assert "specsuite: exit 0: no absolute correctness rule broken" in out
    assert "absolute gate:" not in out

    with sqlite3.connect(tmp_path / "history.sqlite") as db:
        rows = db.execute("SELECT started_utc, arm, build_hash, outcome FROM runs ORDER BY started_utc").fetchall()
    # two nights of the candidate, stored by the recipe's ingest only (the sessions store nothing themselves)
    assert [(row[0][:10], row[1], row[2], row[3]) for row in rows] == [
        ("2026-12-05", "candidate", "refserver-nofix", "failed"), ("2026-12-06", "candidate", "refserver-fix", "passed")]
    assert "| candidate | refserver-fix |" in out  # `history list`, the recipe's last table
    plots = list((tmp_path / "nightly-2026-12-06" / "history" / "trends").glob("*/*.png"))
    assert plots and any(plot.name.startswith("fallback_ids") for plot in plots), plots
    print("trend plots:", *sorted(str(plot) for plot in plots), sep="\n  ")
    assert list((tmp_path / "nightly-2026-12-06" / "sessions").glob("*.junit.xml"))
