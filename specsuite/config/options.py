"""Every option of specsuite, declared once: pytest's `addoption` and the `specsuite` argparse
parsers are both built from `OPTIONS`, and docs/options.md is generated from it.

    python -m specsuite.config.options --markdown        # the table of docs/options.md
    python -m specsuite.config.options --write           # rewrite docs/options.md

An `Option` is plain data: its flag, help, default (or a default taken from an environment
variable, or computed on first use so that importing this module stays cheap), value type, and
the front ends that carry it (`FRONT_ENDS`).  `add_options` takes an `addoption`-like callable
(pytest's `group.addoption` or argparse's `add_argument`), so this module never imports pytest.
Adding an option is one entry in `OPTIONS`.

Comma lists (temperatures, top_p values, lossless settings, concurrencies) are stored as the text
given and parsed by one parser, `parse_list`, with one rule: items are split on commas, blank
items are ignored, at least one item is needed, and each item must be a number of the option's
kind inside the option's range (a temperature is never negative).  Bad input raises a one-line
`SpecsuiteError` that names the option.

Older names still work: `Alias` entries are accepted wherever they were before, and
`deprecation_notes` gives the one line to print when a command line uses one.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specsuite.config.bench_profiles import BENCH_SERVING as BENCH_SERVING_PROFILE
from specsuite.config.bench_profiles import SUITE
from specsuite.errors import SpecsuiteError
from specsuite.project_paths import RESULTS_DIR
from specsuite.server import kinds
from specsuite.server.session import SERVER_URL_ENV

# The front ends, in the order the docs list them; a subcommand's verbs are front ends of their own.
FRONT_ENDS = ("pytest", "run", "gsm8k", "bench", "history", "history ingest", "history list", "report", "serve-reference", "serve-vllm",
              "serve-sglang")
CLI_FRONT_ENDS = FRONT_ENDS[1:]

# pytest option groups (`pytest --help` sections) and their titles.
PYTEST_GROUPS = {
    "specsuite": "specsuite: speculative-decoding server checks",
    "specsuite kernel": "specsuite kernel suite: SGLang's chain rejection sampler, no server",
}

RESULTS_DB_ENV = "SPECSUITE_RESULTS_DB"
DOCS_PATH = Path(__file__).resolve().parents[2] / "docs" / "options.md"


def results_db_default() -> str | None:
    """`--results-db`'s default on every front end: env SPECSUITE_RESULTS_DB, else none."""
    return os.environ.get(RESULTS_DB_ENV) or None


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


def _number(item: str, kind: type, option: str) -> float:
    try:
        return kind(item)
    except ValueError:
        noun = "integers" if kind is int else "numbers"
        raise SpecsuiteError(f"{option} expects comma-separated {noun}, got {item!r}") from None


def parse_list(text: str, option: str, *, kind: type = float, bounds: Range | None = None) -> list[Any]:
    """A comma list of numbers: '0,0.6,1.0' -> [0.0, 0.6, 1.0]; each item inside `bounds`."""
    values = []
    for item in split_list(text, option):
        value = _number(item, kind, option)
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


def lossless_settings(text: str, option: str) -> list[Any]:
    """'1.0,0.7:0.9' -> SamplingSetting(1.0, 1.0), SamplingSetting(0.7, 0.9): T or T:TOP_P items."""
    from specsuite.families.lossless.workload import SamplingSetting  # numpy and scipy load only when the suite runs

    settings = []
    for item in split_list(text, option):
        temperature_text, _, top_p_text = item.partition(":")
        temperature = _number(temperature_text, float, option)
        top_p = _number(top_p_text, float, option) if top_p_text else 1.0
        SAMPLED_TEMPERATURE.check(temperature, item, option)
        TOP_P.check(top_p, item, option)
        settings.append(SamplingSetting(temperature, top_p))
    return settings


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


def _fault_policy(text: str, option: str) -> None:
    from specsuite.server.faults import RunPolicy  # only when the option is given a value

    try:
        RunPolicy.parse(text)
    except SpecsuiteError as exc:
        raise SpecsuiteError(f"{option}: {str(exc).removeprefix('fault policy: ')}") from None


def _fail_on(text: str, option: str) -> None:
    from specsuite.analysis.fail_on import parse_fail_on

    try:
        parse_fail_on(text)
    except SpecsuiteError as exc:
        raise SpecsuiteError(f"{option}: {exc}") from None


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
    check: Callable[[str, str], None] | None = None  # a text option's grammar (a URL, the fault policy, fail-on rules), checked likewise
    server_field: str | None = None  # the ServerOptions field it sets (specsuite/server/session.py), in every front end's RunConfig
    bench_field: str | None = None  # `specsuite bench`: the BenchConfig field it chooses (specsuite/session/bench.py `chosen_from_cli`)
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


def _lossless_default(name: str) -> Callable[[], Any]:
    def default() -> Any:
        from specsuite.families.lossless.workload import LosslessConfig

        value = getattr(LosslessConfig(), name)
        return ",".join(map(str, value)) if isinstance(value, tuple) else value

    return default


def _kernel_default(name: str) -> Callable[[], Any]:
    def default() -> Any:
        import importlib

        # numpy (and scipy) load only when a pytest parser is built; DEFAULT_ROWS lives beside the distribution tests
        module = importlib.import_module("specsuite.kernels.distribution" if name == "DEFAULT_ROWS" else "specsuite.kernels.inputs")
        return getattr(module, name)

    return default


PYTEST_RUN = ("pytest", "run")
SERVER_FRONT_ENDS = ("pytest", "run", "gsm8k", "bench")
HISTORY_ALL = ("history", "history ingest", "history list")
HISTORY_FILTERS = ("history", "history list")
BENCH_SERVING = "benchmark"  # `specsuite bench`'s group of bench_serving's flags


def _bench_backend_defaults() -> str:
    """--bench-backend's default, said per server kind: "vllm on a vLLM server, else sglang"."""
    others = [f"{kind.default_bench_backend} on a {kind.display_name} server" for kind in kinds.all_kinds()[1:]]
    return ", ".join([*others, f"else {kinds.fallback().default_bench_backend}"])


OPTIONS: tuple[Option, ...] = (
    # ---- the server under test (specsuite/pytest_plugin/plugin.py) and the baseline
    Option("--server-url", "base URL of a running server under test; `specsuite run` compares it against --baseline-url. "
           "The API key comes from SPECSUITE_API_KEY", SERVER_FRONT_ENDS, env=SERVER_URL_ENV,
           default_text="--launch, else the embedded reference server", pytest_area="plugin", cli_group="server",
           help_for=(("pytest", "base URL of a running server under test. The API key comes from SPECSUITE_API_KEY"),
                     ("run", "base URL of the candidate server, compared against --baseline-url. The API key comes from SPECSUITE_API_KEY"),
                     ("gsm8k", "base URL of the server to measure. The API key comes from SPECSUITE_API_KEY"),
                     ("bench", "base URL of the server to benchmark. The API key comes from SPECSUITE_API_KEY")),
           default_text_for=(("run", "env SPECSUITE_SERVER_URL, else the embedded reference arms (nofix against fix)"),),
           aliases=(Alias("--base-url", ("bench",), deprecated=False),), check=server_url, server_field="server_url"),  # bench_serving's name for it
    Option("--baseline-url", "a baseline server for the A/B: the ab suite runs the same cases on both, the perf suite interleaves "
           "benchmark runs; `specsuite run` makes it the last arm", PYTEST_RUN, pytest_area="plugin",
           help_for=(("pytest", "a baseline server for the A/B: the ab suite runs the same cases on both, the perf suite interleaves "
                                "benchmark runs"),
                     ("run", "base URL of the baseline server: the last arm, the one every other arm is compared against")),
           aliases=(Alias("--bench-baseline-url", ("pytest",)),), check=server_url),
    Option("--launch", "start this server command, wait until ready, log to the results folder, stop it after", ("pytest", "gsm8k", "bench"),
           metavar="CMD", pytest_area="plugin", cli_group="server", server_field="launch"),
    Option("--launch-url", "URL the --launch command serves on", ("pytest", "bench"), metavar="URL",
           default_text="parsed from its --host/--port, else http://127.0.0.1:30000", pytest_area="plugin", cli_group="server", server_field="launch_url"),
    Option("--launch-timeout", "seconds to wait for a launched server", ("pytest",), default=600.0, type=float, pytest_area="plugin",
           bounds=SECONDS, server_field="ready_timeout_s"),
    Option("--request-timeout", "seconds the harness waits for one answer (or between two stream chunks) before it gives up on "
           "the request; results name such requests 'timed out', apart from requests the server failed", ("pytest", "gsm8k"),
           default=120.0, type=float, pytest_area="plugin", bounds=SECONDS, server_field="request_timeout_s"),
    Option("--server-kind", "SGLang or vLLM; auto asks the server (/model_info for SGLang, /version and /v1/models for vLLM)",
           ("pytest", "gsm8k"), default=kinds.AUTO, choices=kinds.choices(), pytest_area="plugin", cli_group="server", server_field="server_kind"),
    Option("--arm-name", "label for this server in results and A/B reports", ("pytest", "gsm8k"),
           default_text="the reference arm, or 'candidate'", pytest_area="plugin", server_field="arm"),
    Option("--temperatures", "comma-separated sampling temperatures of the correctness grid (each >= 0)", PYTEST_RUN, default="0,0.6,1.0",
           parse=temperature_list, pytest_area="plugin"),
    Option("--top-p", "comma-separated top_p values of the correctness grid (each in (0, 1])", PYTEST_RUN, default="0.95,1.0",
           parse=top_p_list, pytest_area="plugin"),
    Option("--profile", "token budget per case; nightly also implies --require-server-url", PYTEST_RUN, default="smoke",
           choices=("smoke", "nightly"), pytest_area="plugin", pytest_flag="--specsuite-profile",
           pytest_flag_why="pytest-profiling declares --profile (its cProfile switch)",
           help_for=(("run", "token budget per case; nightly also implies --require-server-url and exits 1 when a candidate is "
                             "worse or suspect on a correctness metric (no --fail-on needed)"),)),
    Option("--results-dir", "where run folders go (`specsuite bench`: its JSONL and server logs)", SERVER_FRONT_ENDS,
           default=RESULTS_DIR, pytest_area="plugin", cli_group="server",
           help_for=(("pytest", "where run folders go"), ("run", "where run folders go"), ("gsm8k", "where run folders go"),
                     ("bench", "where the JSONL results and server logs go"))),
    Option("--run-id", "name of this run's results folder", PYTEST_RUN, default_text="UTC time plus a suffix", pytest_area="plugin"),
    Option("--tokenizer", "local tokenizer folder", SERVER_FRONT_ENDS, default_text="the server's tokenizer_path, if it exists here",
           pytest_area="plugin", cli_group=BENCH_SERVING, server_field="tokenizer", bench_field="tokenizer"),
    Option("--vocab-size", "the model's vocab_size (embedding rows); overrides config.json", ("pytest", "run", "gsm8k"), type=int,
           pytest_area="plugin", bounds=COUNT, server_field="vocab_size"),
    Option("--prompts", "JSONL prompt set", ("pytest",), default_text="specsuite/fixtures/data/correctness_prompts.jsonl", pytest_area="plugin"),
    Option("--seed", "base seed for per-request sampling seeds (recorded); `specsuite run`'s repeat k uses seed + k - 1",
           ("pytest", "run", "gsm8k"), default=0, type=int, pytest_area="plugin", pytest_flag="--specsuite-seed",
           pytest_flag_why="a generic name that test projects' own conftest.py files often declare",
           help_for=(("pytest", "base seed for per-request sampling seeds (recorded)"),
                     ("gsm8k", "base seed for per-request sampling seeds and the shots (recorded)"),
                     ("run", "base seed for per-request sampling seeds (recorded); repeat k uses seed + k - 1")), bounds=SEED),
    Option("--alpha", "significance level of the suites' statistical checks (lossless: the run's budget, split over its tests)", ("pytest",),
           default=0.001, type=float, pytest_area="plugin", bounds=SIGNIFICANCE),
    Option("--max-stray-per-1200", "optional absolute cap on stray characters per 1200 tokens", ("pytest",), type=float, pytest_area="plugin",
           bounds=NON_NEGATIVE),
    # ---- GSM8K (pytest and `specsuite gsm8k`; the subcommand's short names are older aliases)
    Option("--gsm8k-path", "GSM8K source: 'synthetic' (the project's set), 'hf' (datasets.load_dataset), or a .jsonl/.parquet file",
           ("pytest", "gsm8k"), default="synthetic", pytest_area="plugin"),
    Option("--gsm8k-num-questions", "questions per GSM8K run", ("pytest", "gsm8k"), default=200, type=int, pytest_area="plugin",
           aliases=(Alias("--num-questions", ("gsm8k",)),), bounds=COUNT),
    Option("--gsm8k-num-shots", "few-shot examples", ("pytest", "gsm8k"), default=5, type=int, pytest_area="plugin",
           aliases=(Alias("--num-shots", ("gsm8k",)),), bounds=NON_NEGATIVE_COUNT),
    Option("--gsm8k-temperatures", "comma-separated GSM8K temperatures (each >= 0)", ("pytest", "gsm8k"), default="0", parse=temperature_list,
           pytest_area="plugin", aliases=(Alias("--temperatures", ("gsm8k",)),)),
    Option("--gsm8k-parallel", "concurrent GSM8K requests", ("pytest", "gsm8k"), default=16, type=int, pytest_area="plugin",
           aliases=(Alias("--parallel", ("gsm8k",)),), bounds=COUNT),
    Option("--gsm8k-shots-from-eval", "take shots from the evaluated questions, as sglang's few_shot_gsm8k does", ("pytest", "gsm8k"),
           action="store_true", default_text="excluded", pytest_area="plugin", aliases=(Alias("--shots-from-eval", ("gsm8k",)),)),
    Option("--gsm8k-min-accuracy", "fail below this accuracy (SGLang's last-integer rule)", ("pytest",), type=float, pytest_area="plugin", bounds=PROBABILITY),
    Option("--gsm8k-max-invalid", "fail above this invalid fraction", ("pytest",), type=float, pytest_area="plugin", bounds=PROBABILITY),
    # ---- session policy (specsuite/pytest_plugin/core.py)
    Option("--fault-policy", "when request failures stop the run, e.g. consecutive=3,retries=3,retry_cap=10,backoff=1 "
           "(the defaults; see specsuite/server/faults.py)", ("pytest",), default="", metavar="SPEC", pytest_area="pytest_plugin", check=_fault_policy),
    Option("--require-server-url", "refuse to fall back to the embedded reference server when no server is given "
           "(--server-url or SPECSUITE_SERVER_URL, --launch; `specsuite run`: also --baseline-url, --arm); pytest exits 4, specsuite 2; "
           "--profile nightly implies it", SERVER_FRONT_ENDS, action="store_true", pytest_area="pytest_plugin", cli_group="server",
           help_for=(("pytest", "refuse to fall back to the embedded reference server when no server is given (--server-url or "
                                "SPECSUITE_SERVER_URL, --launch): exit 4; --specsuite-profile nightly implies it"),
                     ("run", "refuse to fall back to the embedded reference arms when no server is given (--server-url, "
                             "--baseline-url, --arm): exit 2; --profile nightly implies it"),
                     ("gsm8k", "refuse to fall back to the embedded reference server when no server is given (--server-url or "
                               "SPECSUITE_SERVER_URL, --launch): exit 2"),
                     ("bench", "refuse to fall back to the embedded reference server when no server is given (--server-url or "
                               "SPECSUITE_SERVER_URL, --launch): exit 2")), server_field="require_server_url"),
    Option("--specsuite-config", "every setting of the session from this JSON file (a whole RunConfig, as "
           "specsuite/session/config_file.py writes it); no other specsuite option may be given with it", ("pytest",), metavar="PATH",
           pytest_area="pytest_plugin"),
    # ---- integrity (specsuite/pytest_plugin/integrity.py)
    Option("--assume-deterministic", "treat the server as honouring sampling_seed with batch-invariant numerics", ("pytest",),
           action="store_true", default_text="only when the server reports a batch-invariance promise (SGLang "
           "enable_deterministic_inference, vLLM VLLM_BATCH_INVARIANT), or for the reference server", pytest_area="integrity"),
    Option("--integrity-stop-offsets", "token offsets per prompt at which stop strings and stop ids are placed", ("pytest",), default=24,
           type=int, pytest_area="integrity", bounds=COUNT),
    Option("--integrity-batch-size", "requests in the canary isolation batch", ("pytest",), default=64, type=int, pytest_area="integrity", bounds=COUNT),
    # ---- losslessness (specsuite/pytest_plugin/lossless.py)
    Option("--lossless-reference-url", "a speculation-off server of the same model, the reference of the two-sample and greedy lossless "
           "tests (not a baseline: the candidate must match it in distribution)", ("pytest",),
           default_text="launch the embedded reference with --speculative-algorithm NONE", pytest_area="lossless",
           aliases=(Alias("--reference-url", ("pytest",)),)),
    Option("--lossless-temperatures", "lossless sampling settings, T or T:TOP_P, comma-separated (T > 0, top_p in (0, 1])", ("pytest",),
           default="1.0,0.7:0.9", parse=lossless_settings, pytest_area="lossless"),
    Option("--lossless-samples", "PIT generations per setting", ("pytest",), default_factory=_lossless_default("pit_requests"), type=int,
           pytest_area="lossless", bounds=COUNT),
    Option("--lossless-max-new-tokens", "tokens per PIT generation; positions 2.. are tested", ("pytest",),
           default_factory=_lossless_default("pit_max_new_tokens"), type=int, pytest_area="lossless",
           bounds=Range("a token count (positions 2.. are tested)", low=3)),
    Option("--lossless-top-k", "top_logprobs_num of the scoring request; the rest is the PIT's tail bucket", ("pytest",),
           default_factory=_lossless_default("top_k"), type=int, pytest_area="lossless", bounds=COUNT),
    Option("--lossless-two-sample-size", "two-sample generations per prompt and server", ("pytest",),
           default_factory=_lossless_default("two_sample_size"), type=int, pytest_area="lossless", bounds=COUNT),
    Option("--lossless-two-sample-prompts", "fixed prompts of the two-sample test", ("pytest",),
           default_factory=_lossless_default("two_sample_prompts"), type=int, pytest_area="lossless", bounds=COUNT),
    Option("--lossless-greedy-prompts", "prompts of the greedy-equality test", ("pytest",), default_factory=_lossless_default("greedy_prompts"),
           type=int, pytest_area="lossless", bounds=COUNT),
    Option("--lossless-greedy-tokens", "max_new_tokens of the greedy-equality test", ("pytest",),
           default_factory=_lossless_default("greedy_max_new_tokens"), type=int, pytest_area="lossless", bounds=COUNT),
    Option("--lossless-concurrencies", "client concurrencies of the greedy-equality test, comma-separated (each >= 1)", ("pytest",),
           default_factory=_lossless_default("greedy_concurrencies"), parse=count_list, pytest_area="lossless"),
    Option("--lossless-concurrency", "requests in flight for the sampled lossless tests", ("pytest",),
           default_factory=_lossless_default("concurrency"), type=int, pytest_area="lossless", bounds=COUNT),
    Option("--lossless-numerics-gap", "a greedy divergence (lossless greedy equality, the integrity suite's stream vs non-stream, "
           "stop, budget and batch comparisons) to a token within this many nats of the reference's top counts as numerics, "
           "not a failure", ("pytest",),
           default_text="from the served dtype: 2 steps of it at logit 16 (float16 0.03125, bfloat16 0.25, float32 0.001)",
           type=float, pytest_area="lossless", bounds=NON_NEGATIVE),
    # ---- the in-suite serving benchmark (specsuite/pytest_plugin/bench.py); `specsuite bench` has bench_serving's flags instead.
    # Both take their sizes from one table of named profiles (specsuite/config/bench_profiles.py: "suite", "bench_serving").
    Option("--bench-backend", "benchmark backend (vllm: streamed /v1/completions as `vllm bench serve` sends it)", ("pytest",),
           default_text=_bench_backend_defaults(), choices=kinds.bench_backend_names(),
           pytest_area="bench"),
    Option("--bench-dataset", "benchmark dataset", ("pytest",), default="random", choices=("random", "random-ids", "sharegpt"), pytest_area="bench"),
    Option("--bench-dataset-path", "ShareGPT JSON/JSONL file or 'hf'", ("pytest",), default_text="the bundled prompts", pytest_area="bench"),
    Option("--bench-num-prompts", "measured requests per benchmark run", ("pytest",), default=SUITE.num_prompts, type=int, pytest_area="bench", bounds=COUNT),
    Option("--bench-input-len", "random prompt length in tokens", ("pytest",), default=SUITE.random_input_len, type=int, pytest_area="bench", bounds=COUNT),
    Option("--bench-output-len", "output tokens per request", ("pytest",), default=SUITE.random_output_len, type=int, pytest_area="bench", bounds=COUNT),
    Option("--bench-range-ratio", "bench_serving range ratio (1.0 = fixed lengths; 0 means [1, L])", ("pytest",), default=SUITE.random_range_ratio,
           type=float, pytest_area="bench", bounds=PROBABILITY),
    Option("--bench-max-concurrency", "concurrent requests", ("pytest",), default=SUITE.max_concurrency, type=int, pytest_area="bench", bounds=COUNT),
    Option("--bench-request-rate", "Poisson arrivals per second", ("pytest",), default=math.inf, type=float, pytest_area="bench", bounds=RATE),
    Option("--bench-warmup", "warmup requests", ("pytest",), default=1, type=int, pytest_area="bench", bounds=NON_NEGATIVE_COUNT),
    Option("--bench-no-flush", "do not flush the server after warmup (accept length then includes earlier traffic)", ("pytest",),
           action="store_true", pytest_area="bench"),
    Option("--bench-text-prompts", "send decoded text instead of token ids (bench_serving's default)", ("pytest",), action="store_true",
           pytest_area="bench"),
    Option("--bench-repeats", "interleaved runs per arm when a baseline is given", ("pytest",), default=3, type=int, pytest_area="bench", bounds=COUNT),
    Option("--bench-margin", "equivalence margin for TOST, relative (0.01 = ±1%)", ("pytest",), default=0.01, type=float, pytest_area="bench", bounds=MARGIN),
    Option("--bench-fail-on", "fail-on rules for the bench metrics (itl_median, output_throughput)", ("pytest",), default="itl_median:+1%",
           metavar="RULES", pytest_area="bench", check=_fail_on),
    # ---- the history database (specsuite/pytest_plugin/history.py and `specsuite history`)
    Option("--results-db", "history database: a file path, sqlite:///FILE or postgresql://USER@HOST:PORT/DB. Not given: a pytest "
           "session stores nothing, `specsuite history` reads specsuite-results/history.sqlite", ("pytest", *HISTORY_ALL),
           default_factory=results_db_default, env=RESULTS_DB_ENV, metavar="URL", pytest_area="history",
           help_for=(("pytest", "history database: a file path, sqlite:///FILE or postgresql://USER@HOST:PORT/DB; not given, "
                                "the session stores nothing"),
                     *((verb, "history database: a file path, sqlite:///FILE or postgresql://USER@HOST:PORT/DB (default "
                              "specsuite-results/history.sqlite)") for verb in HISTORY_ALL))),
    Option("--compare-to", "the nightly regression test's baseline, from the history: the newest passed run of tonight's "
           "configuration and arm, or that run id (needs --results-db)", ("pytest",), metavar="last-good|RUN_ID", pytest_area="history"),
    Option("--build-hash", "the server build under test, stored with the run", ("pytest", "history ingest"), env="SPECSUITE_BUILD_HASH",
           pytest_area="history"),
    Option("--accelerator", "the accelerator, e.g. MI355X, stored with the run; part of the configuration fingerprint, so runs on "
           "different accelerators are never compared", ("pytest", "history ingest"), env="SPECSUITE_ACCELERATOR",
           cli_dest="ingest_accelerator", pytest_area="history"),
    # ---- the kernel suite (specsuite/pytest_plugin/kernel.py)
    Option("--kernel", "the sampler under test: installed, sglang==VERSION, a path to reject_sampling.py (each may end in :block), "
           "refserver[:nofix], vllm==VERSION or vllm-installed (each may end in :expand-fix)",
           ("pytest",), metavar="SOURCE", default_text="installed when SGLang is importable, else the suite skips", pytest_area="kernel",
           pytest_group="specsuite kernel"),
    Option("--kernel-vocab", "the kernel's vocab width (embedding rows)", ("pytest",), default_factory=_kernel_default("DEFAULT_VOCAB"),
           type=int, pytest_area="kernel", pytest_group="specsuite kernel", range_checked_by_plugin=True),
    Option("--tokenizer-vocab", "the tokenizer's length; ids from it to --kernel-vocab are padded rows", ("pytest",), type=int,
           default_text="--kernel-vocab", pytest_area="kernel", pytest_group="specsuite kernel", range_checked_by_plugin=True),
    Option("--kernel-batch", "rows per kernel call", ("pytest",), default_factory=_kernel_default("DEFAULT_BATCH"), type=int,
           pytest_area="kernel", pytest_group="specsuite kernel", range_checked_by_plugin=True),
    Option("--kernel-steps", "draft steps per row", ("pytest",), default_factory=_kernel_default("DEFAULT_STEPS"), type=int,
           pytest_area="kernel", pytest_group="specsuite kernel", range_checked_by_plugin=True),
    Option("--kernel-seed", "seed of every kernel input", ("pytest",), type=int, default_text="--specsuite-seed", pytest_area="kernel",
           pytest_group="specsuite kernel", bounds=SEED),
    Option("--kernel-dist-rows", "rows per distribution scenario (the stated power is for this many)", ("pytest",),
           default_factory=_kernel_default("DEFAULT_ROWS"), type=int, pytest_area="kernel", pytest_group="specsuite kernel", range_checked_by_plugin=True),
    # ---- `specsuite run`
    Option("--arm", "launch an arm per session (repeatable)", ("run",), action="append", default_factory=list, metavar="NAME=LAUNCH_CMD"),
    Option("--reference-sampler", "with the default reference arms, each one's --sampler, e.g. nofix=sglang==0.5.20,fix=sglang==0.5.23",
           ("run",), metavar="ARM=SAMPLER[,ARM=SAMPLER]"),
    Option("--repeats", "interleaved repeats per arm (A B A B ...); launched arms restart each time", ("run",), default=1, type=int, bounds=COUNT),
    Option("--arm-schedule", "sequential: one arm's session at a time, A B A B (each server has the host to itself, so timing "
           "verdicts compare servers); side-by-side: every arm of a repeat at once (half the wall time; the arms share the "
           "host's CPUs, memory bandwidth and, for launched servers, its GPUs unless each arm's CUDA_VISIBLE_DEVICES differs)",
           ("run",), choices=("sequential", "side-by-side"),
           default_text="sequential; side-by-side for the embedded demo arms (CPU emulations; their timing gates nothing)"),
    Option("--markers", "pytest marker expression that narrows the run "
           "(default: the main job, correctness or gsm8k or perf or (lossless and not greedy_equality))", ("run",),
           default=None, short="-m"),
    Option("--pytest-arg", "extra argument passed to every pytest session (repeatable)", ("run",), action="append", default_factory=list,
           metavar="ARG"),
    Option("--fail-on", "exit 1 when a rule fires, e.g. invalid_ids:any,stray_per_1200:worse,itl_median:+1%,gsm8k_accuracy:-2pt "
           "(--profile nightly adds its own gate: worse or suspect on a correctness metric)", ("run",),
           metavar="RULES", check=_fail_on),
    Option("--no-report", "skip rendering report.md/report.html/PNGs", ("run",), action="store_true"),
    # ---- the embedded reference server, when no server is given (`specsuite gsm8k`, `specsuite bench`)
    Option("--reference-arm", "arm of the embedded reference server when no server is given", ("gsm8k", "bench"), default="fix",
           choices=("fix", "nofix", "copy-only", "guards-only"), cli_group="server", server_field="reference_arm"),
    Option("--reference-arg", "extra flag for the embedded reference server, e.g. --reference-arg=--step-time-ms=2.56 (repeatable)",
           ("bench",), action="append", default_factory=list, metavar="ARG", cli_group="server"),
    # ---- `specsuite bench`: bench_serving's flags, names and defaults (the in-suite benchmark has its own --bench-* options)
    Option("--output-file", "JSONL file to append to", ("bench",), default_text="bench_serving's name in --results-dir", cli_group="server"),
    Option("--backend", "benchmark backend (bench_serving's flag; vllm: streamed /v1/completions with usage and token ids, as "
           "`vllm bench serve` sends it)", ("bench",), default=kinds.fallback().default_bench_backend, choices=kinds.bench_backend_names(),
           cli_group=BENCH_SERVING, bench_field="backend"),
    Option("--model", "model name for the OpenAI backends", ("bench",), default_text="the first of /v1/models", cli_group=BENCH_SERVING, bench_field="model"),
    Option("--dataset-name", "benchmark dataset (bench_serving's flag)", ("bench",), default="random", choices=("random", "random-ids", "sharegpt"),
           cli_group=BENCH_SERVING, bench_field="dataset_name"),
    Option("--dataset-path", "ShareGPT JSON/JSONL file, or 'hf'", ("bench",), default_text="the bundled prompts", cli_group=BENCH_SERVING,
           bench_field="dataset_path"),
    Option("--num-prompts", "measured requests (bench_serving's flag)", ("bench",), default=BENCH_SERVING_PROFILE.num_prompts, type=int,
           cli_group=BENCH_SERVING, bounds=COUNT, bench_field="num_prompts"),
    Option("--random-input-len", "random prompt length in tokens (bench_serving's flag)", ("bench",), default=BENCH_SERVING_PROFILE.random_input_len, type=int,
           cli_group=BENCH_SERVING, bounds=COUNT, bench_field="random_input_len"),
    Option("--random-output-len", "output tokens per request (bench_serving's flag)", ("bench",), default=BENCH_SERVING_PROFILE.random_output_len,
           type=int, cli_group=BENCH_SERVING, bounds=COUNT, bench_field="random_output_len"),
    Option("--random-range-ratio", "lengths uniform on [max(L*r,1), L]; 1.0 = fixed length. The default 0.0 means [1, L], NOT fixed",
           ("bench",), default=BENCH_SERVING_PROFILE.random_range_ratio, type=float, cli_group=BENCH_SERVING, bounds=PROBABILITY,
           bench_field="random_range_ratio"),
    Option("--tokenize-prompt", "send token ids (exact prompt lengths) instead of decoded text", ("bench",), action="store_true",
           cli_group=BENCH_SERVING, bench_field="tokenize_prompt"),
    Option("--sharegpt-output-len", "override the ShareGPT output length (bench_serving's flag)", ("bench",), type=int, cli_group=BENCH_SERVING,
           bounds=COUNT, bench_field="sharegpt_output_len"),
    Option("--sharegpt-context-len", "skip ShareGPT requests longer than this (bench_serving's flag)", ("bench",), type=int, cli_group=BENCH_SERVING,
           bounds=COUNT, bench_field="sharegpt_context_len"),
    Option("--request-rate", "Poisson arrivals per second (inf: all at once)", ("bench",), default=math.inf, type=float, cli_group=BENCH_SERVING, bounds=RATE,
           bench_field="request_rate"),
    Option("--max-concurrency", "concurrent requests at most (bench_serving's flag)", ("bench",), type=int, default_text="no limit",
           cli_group=BENCH_SERVING, bounds=COUNT, bench_field="max_concurrency"),
    Option("--warmup-requests", "warmup requests", ("bench",), default=1, type=int, cli_group=BENCH_SERVING,
           aliases=(Alias("--warmup", ("bench",), deprecated=False),), bounds=NON_NEGATIVE_COUNT, bench_field="warmup_requests"),
    Option("--flush-cache", "POST /flush_cache after warmup (resets the server's accept-length counters); sends SPECSUITE_ADMIN_API_KEY "
           "when set. A refused flush is a warning and leaves accept_length out", ("bench",), action="store_true", cli_group=BENCH_SERVING,
           bench_field="flush_cache"),
    Option("--seed", "seed of the dataset draw and arrivals (bench_serving's flag and default; the suites' --seed defaults to 0)",
           ("bench",), default=BENCH_SERVING_PROFILE.seed, type=int, cli_group=BENCH_SERVING, bounds=SEED, bench_field="seed"),
    Option("--temperature", "native and vllm backends, as in bench_serving: its OpenAI backends send temperature 0.0 (see --oai-sampling)",
           ("bench",), default=0.0, type=float, cli_group=BENCH_SERVING, bounds=TEMPERATURE, bench_field="temperature"),
    Option("--top-p", "native and vllm backends, sent when below 1, as in bench_serving: its OpenAI backends send no top_p (see --oai-sampling). "
           "One value, unlike the suites' --top-p list", ("bench",), default=1.0, type=float, cli_group=BENCH_SERVING, bounds=TOP_P, bench_field="top_p"),
    Option("--oai-sampling", "specsuite only, a difference from bench_serving: send --temperature and --top-p (below 1) on sglang-oai and "
           "sglang-oai-chat too (bench_serving sends temperature 0.0 and no top_p there unless --extra-request-body has them)", ("bench",),
           action="store_true", cli_group=BENCH_SERVING, bench_field="oai_sampling"),
    Option("--disable-ignore-eos", "stop at EOS (bench_serving's flag; default: ignore_eos)", ("bench",), action="store_true", cli_group=BENCH_SERVING,
           bench_field="ignore_eos", bench_when_set=False),
    Option("--extra-request-body", "merged into every request body (top level)", ("bench",), metavar="JSON", cli_group=BENCH_SERVING,
           bench_field="extra_request_body", parse=json_object),
    Option("--keep-alive", "share keep-alive connections (default: a new connection per request, as bench_serving)", ("bench",),
           action="store_true", cli_group=BENCH_SERVING, bench_field="keep_alive"),
    Option("--tag", "a label stored with the result (bench_serving's flag)", ("bench",), cli_group=BENCH_SERVING, bench_field="tag"),
    Option("--output-details", "also store the generated texts", ("bench",), action="store_true", cli_group=BENCH_SERVING, bench_field="output_details"),
    Option("--disable-tqdm", "no progress bar", ("bench",), action="store_true", cli_group=BENCH_SERVING),
    # ---- `specsuite report`
    Option("results", "a results.json, or the run folder holding it", ("report",), action="positional", metavar="RESULTS.json"),
    Option("--out", "folder for report.md, report.html, results.csv and PNGs", ("report",), required=True, metavar="DIR"),
    # ---- `specsuite history` (render) and its verbs
    Option("--out", "folder for trends.json, regressions.json/.md and trend PNGs", ("history",), metavar="DIR"),
    Option("--alpha", "significance level of each step test (the suites' --alpha is 0.001)", ("history",), default=0.01, type=float, bounds=SIGNIFICANCE),
    Option("--min-size", "nights needed on each side of a step", ("history",), default=2, type=int, bounds=COUNT),
    Option("--metric", "only this metric (repeatable)", ("history",), action="append"),
    Option("--arm", "only runs of this arm", HISTORY_FILTERS),
    Option("--accelerator", "only runs on this accelerator", HISTORY_FILTERS),
    Option("--config-key", "only runs of this configuration fingerprint", HISTORY_FILTERS),
    Option("--latest", "only the newest N nights of each series", HISTORY_FILTERS, type=int, metavar="N", bounds=COUNT),
    Option("results", "results.json files or the run folders holding them", ("history ingest",), action="positional", nargs="+",
           metavar="RESULTS.json"),
    Option("--arm", "only this arm of each file (repeatable)", ("history ingest",), action="append", dest="ingest_arm"),
    Option("--outcome", "whether the run's checks passed; only passed runs can be last-good", ("history ingest",),
           choices=("passed", "failed", "unknown"), default_text="from the file's recorded session exit codes, else unknown"),
    Option("--date", "the run's date, YYYY-MM-DD[THH:MM:SSZ]", ("history ingest",), default_text="the file's created_utc"),
    Option("--node", "the machine that ran the suites", ("history ingest",), default_text="this one"),
    # ---- `specsuite serve-reference`: every flag is the reference server's own (python -m specsuite.refserver --help)
    Option("args", "the reference server's flags (python -m specsuite.refserver --help)", ("serve-reference",), action="positional",
           nargs=argparse.REMAINDER, metavar="ARGS"),
    # ---- `specsuite serve-vllm`: vLLM with one speculation method (specsuite/server/kinds/vllm/launch.py)
    Option("--method", "vLLM's speculation method, or none", ("serve-vllm",), default="eagle", choices=("eagle", "draft_model", "ngram", "none")),
    Option("--port", "port to serve on", ("serve-vllm",), default=8141, type=int, bounds=PORT),
    Option("--host", "address to serve on", ("serve-vllm",), default="127.0.0.1"),
    Option("--model", "the target model folder", ("serve-vllm",), default_text="the project's tiny Llama, specsuite/fixtures/vllm_models/target"),
    Option("--spec-model", "the draft or EAGLE head folder", ("serve-vllm",), default_text="specsuite/fixtures/vllm_models/draft or eagle, by --method"),
    Option("--spec-config", "JSON object merged over the method's --speculative-config, e.g. '{\"num_speculative_tokens\": 5}'", ("serve-vllm",),
           metavar="JSON", parse=json_object),
    Option("--vllm-python", "the Python that has vLLM", ("serve-vllm",), default_text="env SPECSUITE_VLLM_PYTHON, else this Python"),
    Option("--ready-timeout", "seconds to wait for vLLM's /health", ("serve-vllm",), default=900.0, type=float, bounds=SECONDS),
    Option("--patch", "the project's patch on vLLM's PYTHONPATH (specsuite/fixtures/vllm_patches): expand_fix corrects the CPU expand bug "
           "(docs/findings/vllm-spec-padded-ids.md); planted_bias adds acceptance min(1, c*p/q) on top, for power tests. "
           "The server must log the patch's activation line or serve-vllm exits 1", ("serve-vllm",), default="none",
           choices=("none", "expand_fix", "planted_bias")),
    Option("--planted-bias-c", "c of --patch planted_bias (1 is the correct sampler)", ("serve-vllm",), type=float,
           bounds=Range("a bias factor c of min(1, c*p/q) (1 is the correct sampler)", low=0.0, low_open=True)),
    Option("vllm_args", "more vLLM arguments, after --", ("serve-vllm",), action="positional", nargs=argparse.REMAINDER, metavar="-- VLLM_ARGS"),
    # ---- `specsuite serve-sglang`: a real SGLang release on this CPU, on the project's ops (specsuite/server/kinds/sglang/launch.py)
    Option("--sglang-version", "the SGLang release to serve", ("serve-sglang",), default="0.5.23", choices=("0.5.20", "0.5.23")),
    Option("--method", "SGLang's speculation: EAGLE with the project's head, or none", ("serve-sglang",), default="eagle",
           choices=("eagle", "none"), dest="sglang_method"),
    Option("--port", "port to serve on", ("serve-sglang",), default=30000, type=int, dest="sglang_port", metavar="PORT", bounds=PORT),
    Option("--host", "address to serve on", ("serve-sglang",), default="127.0.0.1", dest="sglang_host", metavar="HOST"),
    Option("--sglang-dir", "the folder holding the installed releases (install_sglang.sh DIR VERSION)", ("serve-sglang",),
           default_text="env SPECSUITE_SGLANG_DIR, else .sglang in the checkout"),
    Option("--install", "install the release first if it is not installed", ("serve-sglang",), action="store_true"),
    Option("--ready-timeout", "seconds to wait for SGLang's /health", ("serve-sglang",), default=900.0, type=float,
           dest="sglang_ready_timeout", metavar="SECONDS", bounds=SECONDS),
    Option("sglang_args", "more SGLang arguments, after --", ("serve-sglang",), action="positional", nargs=argparse.REMAINDER,
           metavar="-- SGLANG_ARGS"),
)


def options_for(front_end: str, *, pytest_area: str | None = None) -> list[Option]:
    """The options a front end carries, in table order (for pytest, optionally one plugin's)."""
    if front_end not in FRONT_ENDS:
        raise ValueError(f"unknown front end {front_end!r}")
    # A pytest option without an area is declared with the server options (specsuite/pytest_plugin/plugin.py).
    return [option for option in OPTIONS
            if front_end in option.front_ends and (pytest_area is None or (option.pytest_area or "plugin") == pytest_area)]


def table_problems(options: Iterable[Option] = OPTIONS) -> list[str]:
    """What is wrong with the table itself (unknown front ends or groups, aliases outside their option's front ends)."""
    problems = []
    for option in options:
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
        if option.check is not None and value != "":
            option.check(str(value), name)


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
        "Generated from `specsuite/config/options.py` by `python -m specsuite.config.options --write`; "
        "`tests/config/test_option_table.py` fails when this file and the table disagree.",
        "",
        "Front ends: `pytest` (`pytest suites/ ...`), and the `specsuite` subcommands. A name in *italics* is an older alias that "
        "still works (deprecated: a note is printed when it is used). Comma lists take comma-separated values; blank items are "
        "ignored; each value must be in the option's range (a temperature is never negative).",
        "",
        "| option | front ends | default | what it does |",
        "|---|---|---|---|",
    ]
    for option in OPTIONS:
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
    prefixed = [option for option in OPTIONS if option.pytest_flag]
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
    parser = argparse.ArgumentParser(prog="python -m specsuite.config.options", description="The option table of specsuite.")
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
