"""Every command the documentation gives to paste runs as written, as far as its options go: each shell block of
README.md and docs/*.md is read as a shell would split it, and every `--flag` of a `pytest`, `specsuite VERB` or
`python -m specsuite.refserver` command (and every flag inside `--pytest-arg=` and `--reference-arg=`) must be one that
command takes: pytest's own and its plugins' (`pytest --help`, with the checkout's plugin loaded), each verb's argparse
parser, the reference server's.  A renamed or misplaced flag fails here instead of in a user's nightly.

Before: docs/nightly.md's worked job called `pytest suites/ ... --profile nightly`, which pytest stopped with
"unrecognized arguments" (exit 4): under pytest the flag is `--specsuite-profile`."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELLS = {"sh", "bash", "shell", "console"}
FENCE = re.compile(r"^(\s*)```(\w*)\s*$")
SEPARATORS = {"&&", "||", ";", "|", "&", "(", ")", ";;", "|&"}
# Shell words a command can start with before the program it runs.
PREFIXES = {"exec", "time", "nohup", "env", "then", "do", "else", "if", "while", "until", "!", "{"}
# Variables the documents set to a specsuite entry point (docs: `: "${SPECSUITE:=.venv/bin/specsuite}"`).
SPECSUITE_VARIABLES = {"$SPECSUITE", "${SPECSUITE}"}
FLAG = re.compile(r"--[A-Za-z][\w-]*")


@dataclass(frozen=True)
class Command:
    where: str  # file:line
    program: str  # pytest | specsuite VERB | refserver
    args: tuple[str, ...]


def shell_blocks(path: Path) -> list[tuple[int, list[str]]]:
    """(first line number, lines) of each fenced shell block; blocks of other languages are skipped."""
    blocks: list[tuple[int, list[str]]] = []
    inside, shell, start, indent, lines = False, False, 0, "", []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        fence = FENCE.match(line)
        if fence and not inside:
            inside, shell, start, indent, lines = True, fence.group(2) in SHELLS, number + 1, fence.group(1), []
        elif fence:
            if shell:
                blocks.append((start, lines))
            inside = False
        elif inside:
            lines.append(line[len(indent):] if line.startswith(indent) else line)
    return blocks


def logical_lines(start: int, lines: list[str]) -> list[tuple[int, str]]:
    """Lines with their backslash continuations joined, each with its first line's number."""
    joined, pending, first = [], "", start
    for offset, line in enumerate(lines):
        if not pending:
            first = start + offset
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        joined.append((first, pending + line))
        pending = ""
    if pending:
        joined.append((first, pending))
    return joined


def words(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    return list(lexer)


def commands(path: Path) -> list[Command]:
    found = []
    for start, lines in shell_blocks(path):
        for number, line in logical_lines(start, lines):
            where = f"{path.relative_to(ROOT)}:{number}"
            try:
                tokens = words(line)
            except ValueError as exc:
                raise AssertionError(f"{where}: the shell cannot split this line ({exc}): {line}") from None
            simple: list[str] = []
            for token in [*tokens, ";"]:
                if token in SEPARATORS:
                    command = _command(where, simple)
                    if command is not None:
                        found.append(command)
                    simple = []
                else:
                    simple.append(token)
    return found


def _command(where: str, tokens: list[str]) -> Command | None:
    """The pytest, specsuite or reference-server command among these words (after assignments and shell keywords)."""
    index = 0
    while index < len(tokens) and (tokens[index] in PREFIXES or re.match(r"^[A-Za-z_]\w*=", tokens[index])):
        index += 1
    rest = tokens[index:]
    if not rest:
        return None
    program = rest[0]
    name = program.rsplit("/", 1)[-1]
    if name == "pytest":
        return Command(where, "pytest", tuple(rest[1:]))
    if name in SPECSUITE_VARIABLES or program in SPECSUITE_VARIABLES or name == "specsuite":
        return Command(where, f"specsuite {rest[1]}", tuple(rest[2:])) if len(rest) > 1 else None
    if re.fullmatch(r"python[\d.]*", name) and len(rest) > 2 and rest[1] == "-m":
        module = rest[2]
        if module == "pytest":
            return Command(where, "pytest", tuple(rest[3:]))
        if module == "specsuite.cli.main" and len(rest) > 3:
            return Command(where, f"specsuite {rest[3]}", tuple(rest[4:]))
        if module == "specsuite.refserver":
            return Command(where, "refserver", tuple(rest[3:]))
    return None


@lru_cache(maxsize=1)
def pytest_flags() -> frozenset[str]:
    """pytest's long options with the checkout's plugin and the installed plugins loaded, as `pytest --help` lists them."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--help"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return frozenset(FLAG.findall(result.stdout))


def _parser_flags(parser: argparse.ArgumentParser) -> set[str]:
    """A parser's long options and those of its subcommands (`specsuite history ingest`'s under `history`)."""
    flags = {option for action in parser._actions for option in action.option_strings if option.startswith("--")}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                flags |= _parser_flags(sub)
    return flags


@lru_cache(maxsize=1)
def specsuite_flags() -> dict[str, frozenset[str]]:
    from specsuite.cli.main import build_parser
    from specsuite.refserver.cli import build_parser as refserver_parser

    verbs = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    flags = {f"specsuite {verb}": frozenset(_parser_flags(parser)) for verb, parser in verbs.items()}
    flags["refserver"] = frozenset(_parser_flags(refserver_parser()) | {"--help"})
    flags["specsuite serve-reference"] = flags["refserver"]  # every flag goes to the reference server's parser
    return flags


def known_flags(program: str) -> frozenset[str] | None:
    if program == "pytest":
        return pytest_flags()
    return specsuite_flags().get(program)


def unknown_flags(command: Command) -> list[str]:
    """Each flag the command does not take, as `program --flag` (flags after a bare `--` belong to another program)."""
    known = known_flags(command.program)
    if known is None:
        return [f"{command.program}: no such command"]
    bad = []
    for token in command.args:
        if token == "--":
            break
        match = FLAG.match(token)
        if not match:  # a value: a launch command (`--launch CMD`, `--arm NAME=CMD`) is a command of its own
            bad += _nested(command.where, token.split("=", 1)[1] if re.match(r"^\w+=\S* ", token) else token)
            continue
        if "$" in token:
            continue
        flag = match.group(0)
        value = token.split("=", 1)[1] if "=" in token else ""
        bad += _nested(command.where, value.split("=", 1)[1] if flag == "--arm" and "=" in value else value)
        if flag not in known:
            bad.append(f"{command.program} {flag}")
        inner = token.split("=", 1)[1] if "=" in token else ""
        target = {"--pytest-arg": "pytest", "--reference-arg": "refserver"}.get(flag)
        if target and FLAG.match(inner):
            bad += unknown_flags(Command(command.where, target, (inner,)))
    return bad


ALL_COMMANDS = [command for path in DOCUMENTS for command in commands(path)]


def _nested(where: str, value: str) -> list[str]:
    """The unknown flags of a command given as one word (a launch command), when it is one this test reads."""
    if " " not in value:
        return []
    try:
        command = _command(where, words(value))
    except ValueError:
        return []
    return unknown_flags(command) if command is not None else []


def test_the_documents_hold_the_commands_this_test_reads() -> None:
    programs = {command.program for command in ALL_COMMANDS}
    assert {"pytest", "specsuite run", "specsuite history"} <= programs, programs
    assert any(c.where.startswith("docs/nightly.md") and c.program == "pytest" for c in ALL_COMMANDS)


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_documented_flag_is_an_option_of_its_command(path: Path) -> None:
    wrong = [f"{command.where}: {flag}" for command in ALL_COMMANDS if command.where.startswith(str(path.relative_to(ROOT)) + ":")
             for flag in unknown_flags(command)]
    assert not wrong, "documented flags the command does not take:\n" + "\n".join(wrong)


def test_a_renamed_flag_is_caught() -> None:
    """The check can fail: `--profile` is `specsuite run`'s, not pytest's (pytest: `--specsuite-profile`)."""
    (pytest_command,) = [c for c in commands_of("pytest suites/ --profile nightly --server-url http://x:1")]
    assert unknown_flags(pytest_command) == ["pytest --profile"]
    (run_command,) = commands_of('.venv/bin/specsuite run --profile nightly --pytest-arg=--launch-timeout=1800 --pytest-arg=--lanch-timeout=1')
    assert unknown_flags(run_command) == ["pytest --lanch-timeout"]
    (launched,) = commands_of('specsuite run --arm fix="python -m specsuite.refserver --port 31000 --arms fix"')
    assert unknown_flags(launched) == ["refserver --arms"]


def commands_of(text: str) -> list[Command]:
    return [c for c in (_command("text", words(line)) for _, line in logical_lines(1, text.splitlines())) if c is not None]
