"""An option of specsuite, as plain data, and the one parser of its values: the lowest layer of the option table.

An `Option` is its flag, help, default (or a default taken from an environment variable, or computed on first use so
that importing stays cheap), value type, and the front ends that carry it (`FRONT_ENDS`). The generic options are
declared in specsuite/config/generic_options.py, each workload family's in its package (specsuite/families/<name>/
options.py, listed by its `WorkloadFamily.options`), and specsuite/session/option_table.py assembles the table that
pytest's `addoption`, the `specsuite` argparse parsers and docs/options.md are built from. This module imports no
family, no pytest and no server.

Comma lists (temperatures, top_p values, lossless settings, concurrencies) are stored as the text given and parsed by
one parser, `parse_list`, with one rule: items are split on commas, blank items are ignored, at least one item is
needed, and each item must be a number of the option's kind inside the option's range (a temperature is never
negative). Bad input raises a one-line `SpecsuiteError` that names the option.

A settings section (a frozen dataclass the suites read, `specsuite.run_config.gsm8k`) names the option each field is
read from with `setting_from(OPTIONS)(flag)`: the field's default is the option's, its value goes through the
option's parser; that is the one mapping from options to a section, on every front end.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from specsuite.errors import SpecsuiteError

# The front ends, in the order the docs list them; a subcommand's verbs are front ends of their own.
FRONT_ENDS = ("pytest", "run", "gsm8k", "bench", "history", "history ingest", "history list", "report", "serve-reference", "serve-vllm",
              "serve-sglang")
CLI_FRONT_ENDS = FRONT_ENDS[1:]
PYTEST_RUN = ("pytest", "run")
SERVER_FRONT_ENDS = ("pytest", "run", "gsm8k", "bench")
BENCH_SERVING = "benchmark"  # `specsuite bench`'s group of bench_serving's flags

# pytest option groups (`pytest --help` sections) and their titles.
PYTEST_GROUPS = {
    "specsuite": "specsuite: speculative-decoding server checks",
    "specsuite kernel": "specsuite kernel suite: SGLang's chain rejection sampler, no server",
}

# A check named rather than given (`Option.check`), for a grammar that lives above the families: the option table
# (specsuite/session/option_table.py) resolves it, so a family's option can name it without importing the analysis.
FAIL_ON_RULES = "fail-on rules"


# ---------------------------------------------------------------- the one list parser

def split_list(text: str, option: str) -> list[str]:
    """The items of a comma list; blank items are skipped, and an empty list is bad input."""
    items = [part.strip() for part in str(text).split(",") if part.strip()]
    if not items:
        raise SpecsuiteError(f"{option} is empty: give one or more comma-separated values")
    return items


@dataclass(frozen=True)
class Range:
    """The values an item may take: [low, high], an end left open when `*_open`."""

    what: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def check(self, value: float, item: str, option: str) -> None:
        too_low = self.low is not None and (value <= self.low if self.low_open else value < self.low)
        too_high = self.high is not None and (value >= self.high if self.high_open else value > self.high)
        if too_low or too_high or math.isnan(value):
            raise SpecsuiteError(f"{option}: {self.what} must be {self.describe()}, got {item!r}")

    def describe(self) -> str:
        if self.low is not None and self.high is not None:
            return f"in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {self.low:g}"
        return f"{'<' if self.high_open else '<='} {self.high:g}"


TEMPERATURE = Range("a temperature", low=0.0)
SAMPLED_TEMPERATURE = Range("a sampled temperature (greedy has its own test)", low=0.0, low_open=True)
TOP_P = Range("top_p", low=0.0, high=1.0, low_open=True)
COUNT = Range("a count", low=1)
NON_NEGATIVE_COUNT = Range("a count", low=0)
SEED = Range("a seed", low=0)
SECONDS = Range("a time in seconds", low=0.0, low_open=True)
PROBABILITY = Range("a fraction", low=0.0, high=1.0)
SIGNIFICANCE = Range("a significance level", low=0.0, high=1.0, low_open=True, high_open=True)
MARGIN = Range("a relative margin", low=0.0, high=1.0, low_open=True, high_open=True)
RATE = Range("a request rate (inf: all at once)", low=0.0, low_open=True)
NON_NEGATIVE = Range("a value", low=0.0)
PORT = Range("a port", low=1, high=65535)


def parse_number(item: str, kind: type, option: str) -> float:
    try:
        return kind(item)
    except ValueError:
        noun = "integers" if kind is int else "numbers"
        raise SpecsuiteError(f"{option} expects comma-separated {noun}, got {item!r}") from None


def parse_list(text: str, option: str, *, kind: type = float, bounds: Range | None = None) -> list[Any]:
    """A comma list of numbers: '0,0.6,1.0' -> [0.0, 0.6, 1.0]; each item inside `bounds`."""
    values = []
    for item in split_list(text, option):
        value = parse_number(item, kind, option)
        if bounds is not None:
            bounds.check(value, item, option)
        values.append(value)
    return values


def temperature_list(text: str, option: str) -> list[float]:
    return parse_list(text, option, bounds=TEMPERATURE)


def top_p_list(text: str, option: str) -> list[float]:
    return parse_list(text, option, bounds=TOP_P)


def count_list(text: str, option: str) -> tuple[int, ...]:
    return tuple(parse_list(text, option, kind=int, bounds=COUNT))



def json_object(text: str, option: str) -> dict[str, Any] | None:
    """A JSON object (`--extra-request-body`, `--spec-config`); empty text is none."""
    import orjson

    if not text:
        return None
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise SpecsuiteError(f"{option} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise SpecsuiteError(f"{option} must be a JSON object, got {type(value).__name__}")
    return value



def server_url(text: str, option: str) -> None:
    """A server URL needs its scheme and host (`127.0.0.1:9` is refused, `http://127.0.0.1:9` taken)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(text)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        ok = False
    if not ok:
        raise SpecsuiteError(f"{option} must look like http://host:port, got {text!r}")


# ---------------------------------------------------------------- the table


@dataclass(frozen=True)
class Alias:
    """An older name of an option, still accepted on these front ends (deprecated unless `deprecated=False`)."""

    flag: str
    front_ends: tuple[str, ...]
    deprecated: bool = True


@dataclass(frozen=True)
class Option:
    """One option, once.  `action` is argparse's: None (a value), store_true, append, or positional."""

    flag: str
    help: str
    front_ends: tuple[str, ...]
    default: Any = None
    default_factory: Callable[[], Any] | None = None  # computed when a parser is built (imports kept lazy)
    default_text: str | None = None  # what an unset option means, for help and docs
    env: str | None = None  # the default comes from this environment variable when it is set
    type: Callable[[str], Any] | None = None
    parse: Callable[[str, str], Any] | None = None  # the value's parser (a comma list, a JSON object); the stored value stays text
    bounds: Range | None = None  # a number's range, checked when a session or command starts (`check_values`)
    range_checked_by_plugin: bool = False  # a number whose range depends on other options, checked by its plugin (specsuite/pytest_plugin/kernel.py)
    check: Callable[[str, str], None] | str | None = None  # a text option's grammar (a URL, the fault policy), checked likewise; a str: a named one
    server_field: str | None = None  # the ServerOptions field it sets (specsuite/server/session.py), in every front end's RunConfig
    bench_field: str | None = None  # the BenchConfig field it chooses, on `specsuite bench` and under pytest alike (specsuite/session/bench.py)
    bench_when_set: Any = True  # a switch's value for that field when given (not given: None, the profile decides)
    pytest_flag: str | None = None  # its name under pytest where `flag` could collide with another pytest plugin's option
    pytest_flag_why: str | None = None  # which plugin (or kind of conftest) declares `flag` too; docs/options.md lists it
    choices: tuple[Any, ...] | None = None
    metavar: str | None = None
    action: str | None = None
    nargs: str | None = None
    required: bool = False
    dest: str | None = None
    cli_dest: str | None = None  # the dest under argparse when it must differ (a verb's option beside its parent's)
    short: str | None = None  # a one-letter name, e.g. -m
    aliases: tuple[Alias, ...] = ()
    pytest_area: str | None = None  # which suites/ module declares it (each plugin can be loaded alone)
    pytest_group: str = "specsuite"
    cli_group: str | None = None  # an argparse argument group, where the parser has one of that name
    help_for: tuple[tuple[str, str], ...] = ()  # (front end, help) where the general help does not fit that command
    default_text_for: tuple[tuple[str, str], ...] = ()  # (front end, shown default) likewise

    def help_on(self, front_end: str) -> str:
        """The help a front end shows: its own text where the option has one, else the general one."""
        return dict(self.help_for).get(front_end, self.help)

    @property
    def positional(self) -> bool:
        return self.action == "positional"

    @property
    def key(self) -> str:
        return self.dest or self.flag.lstrip("-").replace("-", "_")

    def dest_for(self, front_end: str) -> str:
        """Where a parser stores it: under pytest a prefixed name's own (another plugin's `--seed` stores to `seed`)."""
        if front_end == "pytest":
            return self.pytest_flag.lstrip("-").replace("-", "_") if self.pytest_flag else self.key
        return self.cli_dest or self.key

    def flag_on(self, front_end: str) -> str:
        """The option's name on this front end: `pytest_flag` under pytest where it has one, else `flag`."""
        return self.pytest_flag if front_end == "pytest" and self.pytest_flag else self.flag

    def names_for(self, front_end: str) -> list[str]:
        """Every name this front end accepts: the short one, the flag, then the aliases."""
        names = [self.short] if self.short else []
        names.append(self.flag_on(front_end))
        names += [alias.flag for alias in self.aliases if front_end in alias.front_ends]
        return names

    def resolved_default(self) -> Any:
        if self.env and os.environ.get(self.env):
            return os.environ[self.env]
        if self.default_factory is not None:
            return self.default_factory()
        if self.action == "store_true":
            return bool(self.default)
        return self.default

    def default_label(self, markdown: bool = False) -> str:
        """The default as help and docs show it (never the environment's current value); literal
        values in code font when `markdown`, descriptions (`default_text`) as they are."""
        code = (lambda text: f"`{text}`") if markdown else (lambda text: text)
        shown = self.default_text
        if shown is None:
            value = self.default_factory() if self.default_factory is not None else self.default
            literal = "" if value is None or value is False or value == [] else f"{value:g}" if isinstance(value, float) else str(value)
            shown = code(literal) if literal else ""
        if self.env:
            shown = f"env {code(self.env)}" + (f", else {shown}" if shown else "")
        return shown

    def parse_value(self, value: Any) -> Any:
        return value if self.parse is None or value is None else self.parse(value, self.flag)



# ---------------------------------------------------------------- building parsers


def _escape(text: str) -> str:
    return text.replace("%", "%%")  # argparse (and so pytest) %-formats help strings


def option_kwargs(option: Option, front_end: str, *, suppress_default: bool = False) -> dict[str, Any]:
    """addoption/add_argument keyword arguments for one option on one front end."""
    shown = dict(option.default_text_for).get(front_end) or option.default_label()
    aliases = [alias for alias in option.aliases if front_end in alias.front_ends]
    help_text = option.help_on(front_end) + (f" (default: {shown})" if shown else "")
    if aliases:
        help_text += "; also " + ", ".join(alias.flag + (" (deprecated)" if alias.deprecated else "") for alias in aliases)
    kwargs: dict[str, Any] = {"help": _escape(help_text)}
    if option.positional:
        if option.nargs:
            kwargs["nargs"] = option.nargs
        if option.metavar:
            kwargs["metavar"] = option.metavar
        return kwargs
    kwargs["dest"] = option.dest_for(front_end)
    kwargs["default"] = argparse.SUPPRESS if suppress_default else option.resolved_default()
    if option.action:
        kwargs["action"] = option.action
    if option.type is not None:
        kwargs["type"] = option.type
    for name in ("choices", "metavar"):
        if getattr(option, name) is not None:
            kwargs[name] = getattr(option, name)
    if option.required:
        kwargs["required"] = True
    return kwargs



# ---------------------------------------------------------------- settings sections read from options

OPTION = "specsuite_option"  # a settings field's metadata: the flag of the option it is read from
OPTION_OBJECT = "specsuite_option_object"  # ... and that option itself
DECODE = "specsuite_decode"  # a field's metadata: how its value is rebuilt from JSON (specsuite/session/config_file.py)


def typed_value(option: Option, value: Any) -> Any:
    """A value through the option's parser (comma lists parsed, as tuples); other options come typed already."""
    parsed = option.parse_value(value)
    return tuple(parsed) if isinstance(parsed, list) else parsed


def option_default(option: Option) -> Any:
    """The option's default as every front end's parser resolves it (its environment variable, its computed default), typed."""
    return typed_value(option, option.resolved_default())


def pytest_option(options: Iterable[Option], flag: str) -> Option:
    """The option pytest knows under this table flag (a flag may name another option on a `specsuite` verb)."""
    for option in options:
        if option.flag == flag and "pytest" in option.front_ends:
            return option
    raise KeyError(f"no pytest option {flag}")


def setting_from(options: Iterable[Option]) -> Callable[..., Any]:
    """`setting(flag)` for a settings section whose fields read these options: the field's default is the option's
    (`shown`: in the repr; `decode`: its value from JSON, where a list of numbers is not enough)."""
    known = tuple(options)

    def setting(flag: str, *, shown: bool = True, decode: Callable[[Any], Any] | None = None) -> Any:
        option = pytest_option(known, flag)
        metadata = {OPTION: flag, OPTION_OBJECT: option, **({DECODE: decode} if decode else {})}
        return field(default_factory=lambda: option_default(option), metadata=metadata, repr=shown)

    return setting
