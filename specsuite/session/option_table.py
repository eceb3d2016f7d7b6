"""The option table of specsuite: the generic options (specsuite/config/generic_options.py) followed by every registered
workload family's (its `WorkloadFamily.options`, declared in specsuite/families/<name>/options.py). pytest's
`addoption` and the `specsuite` argparse parsers are both built from it, and docs/options.md is generated from it:

    python -m specsuite.session.option_table --markdown        # the table of docs/options.md
    python -m specsuite.session.option_table --write           # rewrite docs/options.md

It sits above the families (it reads the registry) and below the front ends; `add_options` takes an `addoption`-like
callable (pytest's `group.addoption` or argparse's `add_argument`), so this module never imports pytest. A family
registered later (specsuite.families.registry.register) adds its options with no other change: every lookup reads the
registry as it is at the call.

Older names still work: `Alias` entries are accepted wherever they were before, and `deprecation_notes` gives the one
line to print when a command line uses one.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from specsuite.config.generic_options import GENERIC_OPTIONS, RESULTS_DB_ENV, results_db_default
from specsuite.config.option import BENCH_SERVING, FAIL_ON_RULES, FRONT_ENDS, PYTEST_GROUPS, Option, option_kwargs
from specsuite.errors import SpecsuiteError
from specsuite.families.registry import families

__all__ = ["BENCH_SERVING", "RESULTS_DB_ENV", "add_arguments", "add_options", "add_pytest_options", "all_options", "check_values",
           "deprecation_notes", "find_option", "front_end_of", "given_options", "markdown_table", "option_kwargs", "options_for",
           "parse_option", "results_db_default", "table_problems"]

DOCS_PATH = Path(__file__).resolve().parents[2] / "docs" / "options.md"


def all_options() -> tuple[Option, ...]:
    """Every option, in table order: the generic ones, then each registered family's."""
    return GENERIC_OPTIONS + tuple(option for family in families() for option in family.options)


def __getattr__(name: str) -> Any:
    if name == "OPTIONS":  # the table as it is now (a family registered later included)
        return all_options()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _fail_on(text: str, option: str) -> None:
    from specsuite.analysis.fail_on import parse_fail_on  # the registered metrics: above the families, like this table

    try:
        parse_fail_on(text)
    except SpecsuiteError as exc:
        raise SpecsuiteError(f"{option}: {exc}") from None


NAMED_CHECKS: dict[str, Callable[[str, str], None]] = {FAIL_ON_RULES: _fail_on}


def _checker(option: Option) -> Callable[[str, str], None] | None:
    return NAMED_CHECKS[option.check] if isinstance(option.check, str) else option.check


def options_for(front_end: str, *, pytest_area: str | None = None) -> list[Option]:
    """The options a front end carries, in table order (for pytest, optionally one plugin's)."""
    if front_end not in FRONT_ENDS:
        raise ValueError(f"unknown front end {front_end!r}")
    # A pytest option without an area is declared with the server options (specsuite/pytest_plugin/plugin.py).
    return [option for option in all_options()
            if front_end in option.front_ends and (pytest_area is None or (option.pytest_area or "plugin") == pytest_area)]


def table_problems(options: Iterable[Option] | None = None) -> list[str]:
    """What is wrong with the table itself (unknown front ends or groups, aliases outside their option's front ends)."""
    problems = []
    for option in all_options() if options is None else options:
        problems += [f"{option.flag}: unknown front end {name!r}" for name in option.front_ends if name not in FRONT_ENDS]
        problems += [f"{option.flag}: alias {alias.flag} on {name!r}, which the option is not on"
                     for alias in option.aliases for name in alias.front_ends if name not in option.front_ends]
        if option.pytest_group not in PYTEST_GROUPS:
            problems.append(f"{option.flag}: unknown pytest group {option.pytest_group!r}")
        if option.positional and "pytest" in option.front_ends:
            problems.append(f"{option.flag}: pytest has no positional options")
        if option.pytest_flag and not (option.pytest_flag.startswith("--specsuite-") and option.pytest_flag_why and "pytest" in option.front_ends):
            problems.append(f"{option.flag}: a pytest name starts with --specsuite-, says why, and the option is on pytest")
    return problems


def find_option(flag: str, front_end: str = "pytest") -> Option:
    """The option a front end knows under this name (an alias too), or under its table flag (`setting("--seed")`)."""
    for option in options_for(front_end):
        if flag in option.names_for(front_end) or flag in (option.flag, option.key):
            return option
    raise KeyError(f"{front_end} has no option {flag}")


def parse_option(flag: str, value: Any, front_end: str = "pytest") -> Any:
    """The parsed value of a comma-list option (other options are typed by their parser already)."""
    return find_option(flag, front_end).parse_value(value)




def add_options(addoption: Callable[..., Any], front_end: str, options: Iterable[Option] | None = None, *,
                inherited_from: str | None = None) -> None:
    """Declare options through an `addoption`-like callable (pytest's `group.addoption`,
    argparse's `add_argument`).  `inherited_from`: the parent parser of a verb; an option the
    parent carries too gets no default here, so repeating it after the verb keeps the parent's value."""
    for option in options_for(front_end) if options is None else options:
        names = [option.key] if option.positional else option.names_for(front_end)
        suppress = inherited_from is not None and inherited_from in option.front_ends
        addoption(*names, **option_kwargs(option, front_end, suppress_default=suppress))


def add_pytest_options(getgroup: Callable[[str, str], Any], pytest_area: str) -> None:
    """One suites/ module's pytest options, in their `pytest --help` groups; `getgroup` is `parser.getgroup`."""
    for option in options_for("pytest", pytest_area=pytest_area):
        add_options(getgroup(option.pytest_group, PYTEST_GROUPS[option.pytest_group]).addoption, "pytest", [option])


def add_arguments(parser: argparse.ArgumentParser, front_end: str, *, groups: Mapping[str, Any] | None = None,
                  inherited_from: str | None = None, only_group: str | None = None, except_group: str | None = None) -> None:
    """A subcommand's arguments; options with a `cli_group` go to that argument group when `groups` has it.
    `only_group`/`except_group` split one front end's options between two calls (`specsuite bench`)."""
    groups = groups or {}
    for option in options_for(front_end):
        if (only_group is not None and option.cli_group != only_group) or (except_group is not None and option.cli_group == except_group):
            continue
        target = groups.get(option.cli_group or "", parser)
        add_options(target.add_argument, front_end, [option], inherited_from=inherited_from)


# ---------------------------------------------------------------- after parsing


def _uses(argv: Sequence[str], flag: str) -> bool:
    return any(arg == flag or arg.startswith(flag + "=") for arg in argv)


def given_options(argv: Sequence[str], front_end: str) -> tuple[dict[str, Any], list[str]]:
    """The table's options this command line gives, by flag, as the front end's parser stores them (an option not given
    is left out, not defaulted), and the arguments the table does not know, in order."""
    parser = argparse.ArgumentParser(add_help=False, exit_on_error=False, allow_abbrev=False)
    options = [option for option in options_for(front_end) if not option.positional]
    for option in options:
        parser.add_argument(*option.names_for(front_end), **option_kwargs(option, front_end, suppress_default=True))
    try:
        known, rest = parser.parse_known_args(list(argv))
    except (argparse.ArgumentError, SystemExit) as exc:
        raise SpecsuiteError(str(exc) or "bad arguments") from None
    values = vars(known)
    return {option.flag: values[option.dest_for(front_end)] for option in options if option.dest_for(front_end) in values}, rest


def deprecation_notes(argv: Sequence[str], front_end: str) -> list[str]:
    """One line per deprecated name this command line uses."""
    notes = []
    for option in options_for(front_end):
        for alias in option.aliases:
            if alias.deprecated and front_end in alias.front_ends and _uses(argv, alias.flag):
                notes.append(f"{alias.flag} is deprecated; use {option.flag_on(front_end)} (same meaning)")
    return notes


def check_values(values: Mapping[str, Any], front_end: str) -> None:
    """Check every option's value once, so bad input fails in one line naming the option before anything
    runs: comma lists through their parser, numbers against their range (`Option.bounds`), texts with a
    grammar (the fault policy, fail-on rules) through their `Option.check`."""
    for option in options_for(front_end):
        value = values.get(option.dest_for(front_end))
        if value is None:
            continue
        name = option.flag_on(front_end)
        if option.parse is not None:
            option.parse(value, name)
        if option.bounds is not None:
            for item in value if isinstance(value, list) else [value]:
                option.bounds.check(float(item), f"{item:g}" if isinstance(item, float) else str(item), name)
        check = _checker(option)
        if check is not None and value != "":
            check(str(value), name)


def front_end_of(args: argparse.Namespace) -> str:
    """The front end a parsed `specsuite` command line belongs to."""
    verb = getattr(args, "history_verb", None)
    return f"history {verb}" if args.command == "history" and verb else args.command


# ---------------------------------------------------------------- docs/options.md


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table() -> str:
    """docs/options.md: every option once, with its front ends, default and help."""
    lines = [
        "# Options",
        "",
        "Generated from the option table (`specsuite/config/generic_options.py` and each family's `specsuite/families/<name>/options.py`) "
        "by `python -m specsuite.session.option_table --write`; "
        "`tests/config/test_option_table.py` fails when this file and the table disagree.",
        "",
        "Front ends: `pytest` (`pytest suites/ ...`), and the `specsuite` subcommands. A name in *italics* is an older alias that "
        "still works (deprecated: a note is printed when it is used). Comma lists take comma-separated values; blank items are "
        "ignored; each value must be in the option's range (a temperature is never negative).",
        "",
        "| option | front ends | default | what it does |",
        "|---|---|---|---|",
    ]
    for option in all_options():
        names = ([f"`{option.short}`"] if option.short else []) + [f"`{option.flag}`" if not option.positional else f"`{option.metavar}` (positional)"]
        names += [f"`{option.pytest_flag}` (pytest)"] if option.pytest_flag else []
        names += [f"*`{alias.flag}`* ({', '.join(alias.front_ends)}{'' if alias.deprecated else ', not deprecated'})" for alias in option.aliases]
        what = option.help + (f"; one of {', '.join(map(str, option.choices))}" if option.choices else "")
        what += "; required" if option.required else ""
        lines.append(f"| {_cell(', '.join(names))} | {', '.join(option.front_ends)} | {_cell(option.default_label(markdown=True))} | {_cell(what)} |")
    counts = ", ".join(f"{front_end} {len(options_for(front_end))}" for front_end in FRONT_ENDS)
    lines += ["", f"Options per front end: {counts}.", "", *_prefixed_section(), ""]
    return "\n".join(lines)


def _prefixed_section() -> list[str]:
    """Which options pytest knows under a `--specsuite-` name, and why: another pytest plugin (or a project's own
    conftest.py) loaded beside the suites' plugin declaring the same name stops pytest before it starts."""
    prefixed = [option for option in all_options() if option.pytest_flag]
    return [
        "## Prefixed under pytest",
        "",
        "pytest refuses to start when two plugins declare one option name, and the suites' plugin is loaded in every "
        "session of an environment that has specsuite installed (its `pytest11` entry point). These options therefore "
        "have a `--specsuite-` name under pytest; the `specsuite` subcommands keep the short name. The old pytest name "
        "is not kept as an alias: declaring it would keep the collision.",
        "",
        "| pytest name | elsewhere | why |",
        "|---|---|---|",
        *[f"| `{option.pytest_flag}` | `{option.flag}` | {_cell(option.pytest_flag_why or '')} |" for option in prefixed],
        "",
        "Not prefixed: `--server-url` and `--baseline-url` (the documented command is `pytest suites/ --server-url URL`; "
        "no common plugin declares them), and the other options, whose names say what they belong to "
        "(`--gsm8k-*`, `--lossless-*`, `--bench-*`, `--kernel-*`, `--launch*`, `--results-*`) or name this project's "
        "own notions (`--temperatures`, `--top-p`, `--tokenizer`, `--prompts`, `--alpha`, `--fault-policy`); pytest-timeout's "
        "`--timeout`, pytest-randomly's `--randomly-seed`, pytest-xdist's `-n`/`--dist`, pytest-benchmark's `--benchmark-*`, "
        "pytest-html's `--html` and pytest-base-url's `--base-url` (a `specsuite bench` alias only) are not declared under pytest.",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specsuite.session.option_table", description="The option table of specsuite.")
    parser.add_argument("--markdown", action="store_true", help="print docs/options.md")
    parser.add_argument("--write", action="store_true", help=f"rewrite {DOCS_PATH}")
    args = parser.parse_args(argv)
    if args.write:
        DOCS_PATH.write_text(markdown_table(), encoding="utf-8")
        print(f"wrote {DOCS_PATH}")
    if args.markdown or not args.write:
        sys.stdout.write(markdown_table())
    return 0


if __name__ == "__main__":
    sys.exit(main())