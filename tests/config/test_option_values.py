"""Every option's value is checked when a session or command starts: one line naming the option, pytest exit 4,
before anything is collected or any server starts (specsuite/session/option_table.py `check_values`)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from specsuite.config.option import FRONT_ENDS, Range
from specsuite.errors import SpecsuiteError
from specsuite.session.option_table import all_options, check_values, options_for

ROOT = Path(__file__).resolve().parents[2]
NUMBER_OPTIONS = [(front_end, option) for front_end in FRONT_ENDS for option in options_for(front_end)
                  if option.type in (int, float) and not option.range_checked_by_plugin]


def test_every_number_option_has_a_range() -> None:
    assert not [option.flag for option in all_options()
                if option.type in (int, float) and option.bounds is None and not option.range_checked_by_plugin]


def _outside(bounds: Range) -> float:
    """A value just outside the range."""
    if bounds.low is not None:
        return bounds.low if bounds.low_open else bounds.low - 1
    return bounds.high if bounds.high_open else bounds.high + 1


@pytest.mark.parametrize(("front_end", "option"), NUMBER_OPTIONS, ids=[f"{f}:{o.flag}" for f, o in NUMBER_OPTIONS])
def test_a_number_outside_its_range_is_one_line_naming_the_option(front_end: str, option) -> None:
    bad = option.type(_outside(option.bounds))
    name = option.flag_on(front_end)  # the name the user typed on this front end
    with pytest.raises(SpecsuiteError, match=f"^{name}: .* must be "):
        check_values({option.dest_for(front_end): bad}, front_end)
    with pytest.raises(SpecsuiteError, match=f"^{name}: "):
        check_values({option.dest_for(front_end): math.nan} if option.type is float else {option.dest_for(front_end): -10**9}, front_end)


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_every_default_passes(front_end: str) -> None:
    check_values({option.dest_for(front_end): option.resolved_default() for option in options_for(front_end)
                  if not option.positional}, front_end)


@pytest.mark.parametrize(("flag", "value"), [("--fault-policy", "bogus"), ("--bench-fail-on", "itl_median:+0%")])
def test_text_options_with_a_grammar_are_checked_too(flag: str, value: str) -> None:
    option = next(o for o in options_for("pytest") if o.flag == flag)
    with pytest.raises(SpecsuiteError, match=f"^{flag}: "):
        check_values({option.dest_for("pytest"): value}, "pytest")


@pytest.mark.parametrize(("argv", "named"), [(["--alpha", "2"], "--alpha: a significance level must be in (0, 1), got '2'"),
                                             (["-m", "gsm8k", "--gsm8k-num-questions", "-3"], "--gsm8k-num-questions: a count must be >= 1, got '-3'")])
def test_pytest_refuses_a_bad_value_at_session_start(argv: list[str], named: str, tmp_path: Path) -> None:
    """Before: `--alpha 2` ran the suites (8 failed, 7 errors, exit 1), `--gsm8k-num-questions -3` gave 4 tracebacks."""
    done = subprocess.run([sys.executable, "-m", "pytest", str(ROOT / "suites"), "-p", "no:cacheprovider", "--results-dir", str(tmp_path), *argv],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    assert done.returncode == 4, out
    assert f"ERROR: specsuite: {named}" in out and "Traceback" not in out
    assert not list(tmp_path.iterdir())  # no server started, no results folder
