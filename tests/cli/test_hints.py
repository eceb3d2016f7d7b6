"""Every hint names an option that exists for the command that prints it.

The hints are walked where a user meets them: the refusal of the embedded fallback on every front end
(before: `specsuite run --profile nightly` suggested `--launch`, which `specsuite run` does not take),
and what `specsuite run` prints at its end (verdict lines, notes, exit policy). `--pytest-arg=--X`
names a pytest option X, passed through."""

from __future__ import annotations

import argparse
import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from specsuite.analysis.fail_on import evaluate_fail_on, nightly_fail_on
from specsuite.analysis.verdicts import compare_arms
from specsuite.cli.main import main
from specsuite.cli.run import RUN_GIVE_A_SERVER, exit_policy_line
from specsuite.reports.document import ANALYSIS_KEY
from specsuite.reports.summary import run_verdict_lines, summary_document
from specsuite.results.types import Document
from specsuite.session.option_table import FRONT_ENDS, option_kwargs, options_for

ROOT = Path(__file__).resolve().parents[2]
MAIN_JOB = ROOT / "tests" / "data" / "ab_results" / "main_job_smoke.json.gz"
PASSED_THROUGH = re.compile(r"--pytest-arg=(--[a-z][a-z0-9-]*)")
COMMAND_SPAN = re.compile(r"`((?:pytest|specsuite [a-z0-9-]+) [^`]*)`")
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


# Flags of the programs an option passes on to (vLLM, the reference server, a launch command), named in help texts.
FOREIGN_FLAGS = {"--speculative-config", "--host", "--port", "--speculative-algorithm", "--step-time-ms", "--sampler", "--help"}


def unknown_flags(text: str, front_end: str) -> list[str]:
    """The options a hint names that the front end (or, passed through, pytest) does not have."""
    def known(flag: str, where: str) -> bool:
        return any(flag in option.names_for(where) for option in options_for(where))

    missing = []
    for span in COMMAND_SPAN.findall(text):  # `pytest suites/ --x` or `specsuite gsm8k --x`: that command's options
        where = "pytest" if span.startswith("pytest ") else span.split()[1]
        missing += unknown_flags(span.split(" ", 2)[-1], where)
    text = COMMAND_SPAN.sub("", text)
    missing += [flag for flag in PASSED_THROUGH.findall(text) if not known(flag, "pytest")]
    rest = PASSED_THROUGH.sub("--pytest-arg", text)
    return missing + [flag for flag in FLAG.findall(rest) if not known(flag, front_end) and flag not in FOREIGN_FLAGS]


def test_the_walk_itself_catches_a_wrong_hint() -> None:
    assert unknown_flags("pass --server-url URL or --launch CMD", "run") == ["--launch"]
    assert unknown_flags("`specsuite run --pytest-arg=--gsm8k-path=hf`", "run") == []
    assert unknown_flags("`--pytest-arg=--no-such-option`", "run") == ["--no-such-option"]
    assert unknown_flags("`pytest suites/ --gsm8k-path hf` or `specsuite gsm8k --gsm8k-path hf`", "run") == []
    assert unknown_flags("`specsuite bench --gsm8k-path hf`", "run") == ["--gsm8k-path"]


@pytest.mark.parametrize(("front_end", "argv"), [("run", ["run", "--profile", "nightly"]), ("run", ["run", "--require-server-url"]),
                                                  ("gsm8k", ["gsm8k", "--require-server-url"]), ("bench", ["bench", "--require-server-url"])])
def test_the_refused_fallback_names_options_of_its_command(front_end: str, argv: list[str], capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPECSUITE_SERVER_URL", raising=False)
    assert main(argv) == 2
    line = capsys.readouterr().err.strip()
    assert "refuses the embedded reference server" in line, line
    assert unknown_flags(line, front_end) == [], line


def test_pytest_refused_fallback_names_pytest_options(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "pytest", str(ROOT / "suites"), "-p", "no:cacheprovider", "-m", "correctness",
                           "--specsuite-profile", "nightly", "--results-dir", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    line = next(line for line in (done.stdout + done.stderr).splitlines() if "refuses the embedded" in line)
    assert done.returncode == 4 and unknown_flags(line, "pytest") == [], line


def test_what_specsuite_run_prints_at_its_end_names_its_own_options() -> None:
    results = json.loads(gzip.decompress(MAIN_JOB.read_bytes()))
    analysis = compare_arms(Document.from_dict(results))
    results[ANALYSIS_KEY] = analysis.to_dict()  # as results.json holds it
    outcome = evaluate_fail_on(nightly_fail_on(), analysis)
    lines = [RUN_GIVE_A_SERVER, *run_verdict_lines(Document.from_dict(results))]
    for profile in ("smoke", "nightly"):
        for fail_on in (None, "invalid_ids:any"):
            for result in (None, outcome):
                lines.append(exit_policy_line(argparse.Namespace(profile=profile, fail_on=fail_on), result))
    lines += summary_document(Document.from_dict(results), lines[-1]).splitlines()
    assert [(line, unknown_flags(line, "run")) for line in lines if unknown_flags(line, "run")] == []


HELP_CASES = [(front_end, option) for front_end in FRONT_ENDS for option in options_for(front_end)]


@pytest.mark.parametrize(("front_end", "option"), HELP_CASES, ids=[f"{f}:{o.flag}" for f, o in HELP_CASES])
def test_each_help_text_names_options_of_its_own_command(front_end: str, option) -> None:
    """A help text shared by several commands must fit each (`specsuite gsm8k --help` must not speak of `specsuite run`)."""
    text = option_kwargs(option, front_end)["help"].replace("%%", "%")
    assert unknown_flags(text, front_end) == [], text
    other_commands = [name for name in ("specsuite run", "specsuite bench", "specsuite history", "a pytest session")
                      if name in text and name != f"specsuite {front_end}"]
    assert not other_commands, text
