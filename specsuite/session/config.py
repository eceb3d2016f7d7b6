"""The typed run configuration, built the same way from pytest's options and from a `specsuite` verb's flags.

Both front ends read their options through the option table's names (specsuite/config/options.py), so
`run_config_from_options` takes a getter: pytest's `config.getoption`, or the CLI's `getattr(args, ...)`. An option a
front end does not have reads as None and takes the table's default here; equal options give equal configurations
(tests/session/test_session_config.py).

Every option pytest offers is a field here: each field, RunConfig's own and its sections', names its flag in its
metadata (`setting(flag)`), takes its default from the option table and its value through the table's parser, all
read one way (`_section`); the server's options go to ServerOptions (each names its field, `Option.server_field`).
`mapped_options()` lists them all, and tests/session/test_session_config.py fails on a pytest option that is neither mapped
nor listed in `NOT_RUN_SETTINGS`. The suites read these sections (`specsuite.run_config.lossless.pit_requests`), not
pytest's options by name; `specsuite run` hands a whole RunConfig to each child session (specsuite/session/config_file.py),
and `with_options` sets fields by flag where a command line's options join a configuration already built.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from specsuite.config.options import OPTIONS, Option, find_option, parse_option
from specsuite.server.session import ServerOptions

OptionGetter = Callable[[str], Any]  # an option's value by its dest name (`gsm8k_num_questions`), None when absent

OPTION = "specsuite_option"  # a field's metadata: the option-table flag it is read from
SECTION = "specsuite_section"  # a RunConfig field's metadata: a section of settings
DECODE = "specsuite_decode"  # a field's metadata: how its value is rebuilt from JSON (specsuite/session/config_file.py)


def server_options_on(front_end: str) -> list[Option]:
    """The options of this front end that set a ServerOptions field (a specsuite/server type, so the option names the field)."""
    return [option for option in OPTIONS if option.server_field and front_end in option.front_ends]


# pytest options that are not settings of a run (flag: why), so RunConfig leaves them out. Adding one here needs a
# reason a reviewer can check.
NOT_RUN_SETTINGS: Mapping[str, str] = {
    "--specsuite-config": "the file holding a whole RunConfig (`specsuite run`'s sessions), not one setting of it",
}


def _typed(flag: str, value: Any) -> Any:
    """A value through the option table's parser (comma lists parsed, as tuples); other options come typed already."""
    parsed = parse_option(flag, value)
    return tuple(parsed) if isinstance(parsed, list) else parsed


def table_default(flag: str) -> Any:
    """The option's default as every front end's parser resolves it (its environment variable, its computed default)."""
    return _typed(flag, find_option(flag).resolved_default())


def setting(flag: str, *, shown: bool = True, decode: Callable[[Any], Any] | None = None) -> Any:
    """A field read from this option: the table's default, the table's parser (`shown`: in the repr; `decode`: its
    value from JSON, where a list of numbers is not enough)."""
    metadata = {OPTION: flag, **({DECODE: decode} if decode else {})}
    return field(default_factory=lambda: table_default(flag), metadata=metadata, repr=shown)


def _sampling_settings(items: list[dict[str, float]]) -> tuple[Any, ...]:
    from specsuite.families.lossless.workload import SamplingSetting  # numpy and scipy load only when the suite runs

    return tuple(SamplingSetting(**item) for item in items)


def section(cls: type) -> Any:
    return field(default_factory=cls, metadata={SECTION: cls})


@dataclass(frozen=True)
class GSM8KSettings:
    """One GSM8K run per temperature: the data set and how it is asked; and the suite's pass thresholds."""

    path: str = setting("--gsm8k-path")
    num_questions: int = setting("--gsm8k-num-questions")
    num_shots: int = setting("--gsm8k-num-shots")
    parallel: int = setting("--gsm8k-parallel")
    shots_from_eval: bool = setting("--gsm8k-shots-from-eval")
    temperatures: tuple[float, ...] = setting("--gsm8k-temperatures")
    min_accuracy: float | None = setting("--gsm8k-min-accuracy")  # the suite's floor (SGLang's last-integer rule); None: none
    max_invalid: float | None = setting("--gsm8k-max-invalid")  # the suite's cap on unparsable answers; None: none


@dataclass(frozen=True)
class CorrectnessSettings:
    """The correctness suites' sampling grid (every temperature with every top_p) and the optional stray cap."""

    temperatures: tuple[float, ...] = setting("--temperatures")
    top_p: tuple[float, ...] = setting("--top-p")
    max_stray_per_1200: float | None = setting("--max-stray-per-1200")


@dataclass(frozen=True)
class IntegritySettings:
    """The integrity suite: whether sampling_seed is trusted, and its probe sizes."""

    assume_deterministic: bool = setting("--assume-deterministic")
    stop_offsets: int = setting("--integrity-stop-offsets")
    batch_size: int = setting("--integrity-batch-size")


@dataclass(frozen=True)
class LosslessSettings:
    """The losslessness suite: its speculation-off reference and the workload's sizes (LosslessConfig's names)."""

    reference_url: str | None = setting("--lossless-reference-url")
    settings: tuple[Any, ...] = setting("--lossless-temperatures", decode=_sampling_settings)  # SamplingSetting, T or T:TOP_P
    pit_requests: int = setting("--lossless-samples")
    pit_max_new_tokens: int = setting("--lossless-max-new-tokens")
    top_k: int = setting("--lossless-top-k")
    two_sample_prompts: int = setting("--lossless-two-sample-prompts")
    two_sample_size: int = setting("--lossless-two-sample-size")
    greedy_prompts: int = setting("--lossless-greedy-prompts")
    greedy_max_new_tokens: int = setting("--lossless-greedy-tokens")
    greedy_concurrencies: tuple[int, ...] = setting("--lossless-concurrencies")
    concurrency: int = setting("--lossless-concurrency")
    numerics_gap: float | None = setting("--lossless-numerics-gap")  # None: from the served dtype

    def workload_config(self, *, alpha: float, seed: int):
        """The workload's LosslessConfig, with the run's significance level and seed (checked: one line when bad)."""
        from specsuite.families.lossless.workload import LosslessConfig  # numpy and scipy load only when the suite runs

        sizes = {item.name: getattr(self, item.name) for item in fields(self) if item.name != "reference_url"}
        config = LosslessConfig(**sizes, alpha=alpha, seed=seed)
        config.check()
        return config


@dataclass(frozen=True)
class KernelSettings:
    """The kernel suite (no server): the sampler under test and its input shapes. None: the option's stated fallback
    (tokenizer_vocab: the kernel vocab; seed: the run's seed; source: the installed SGLang, else the suite skips)."""

    source: str | None = setting("--kernel")
    vocab: int = setting("--kernel-vocab")
    tokenizer_vocab: int | None = setting("--tokenizer-vocab")
    batch: int = setting("--kernel-batch")
    steps: int = setting("--kernel-steps")
    seed: int | None = setting("--kernel-seed")
    dist_rows: int = setting("--kernel-dist-rows")


@dataclass(frozen=True)
class HistorySettings:
    """The nightly history: where the session is stored, the baseline to take from it, and the labels stored with it."""

    results_db: str | None = setting("--results-db", shown=False)  # a postgresql:// URL may hold a password
    compare_to: str | None = setting("--compare-to")
    build_hash: str | None = setting("--build-hash")
    accelerator: str | None = setting("--accelerator")


@dataclass(frozen=True)
class BenchSettings:
    """The suites' serving benchmark: what its --bench-* options chose (profile "suite" supplies the rest, through the one
    BenchConfig builder, specsuite/session/bench.py) and its A/B against the baseline: repeats, TOST margin, fail-on rules."""

    backend: str | None = setting("--bench-backend")
    dataset: str = setting("--bench-dataset")
    dataset_path: str | None = setting("--bench-dataset-path")
    num_prompts: int = setting("--bench-num-prompts")
    input_len: int = setting("--bench-input-len")
    output_len: int = setting("--bench-output-len")
    range_ratio: float = setting("--bench-range-ratio")
    max_concurrency: int = setting("--bench-max-concurrency")
    request_rate: float = setting("--bench-request-rate")
    warmup: int = setting("--bench-warmup")
    no_flush: bool = setting("--bench-no-flush")
    text_prompts: bool = setting("--bench-text-prompts")
    repeats: int = setting("--bench-repeats")
    margin: float = setting("--bench-margin")
    fail_on: str = setting("--bench-fail-on")  # empty: the table's default rules

    @property
    def fail_on_rules(self) -> str:
        return self.fail_on or find_option("--bench-fail-on").default


@dataclass(frozen=True)
class RunConfig:
    """Everything a run needs that is not a workload's own setting: the server, where results go, the seed, the
    profile, the fault policy, the significance level; and one section per suite."""

    server: ServerOptions = field(default_factory=ServerOptions)
    baseline_url: str | None = setting("--baseline-url")
    results_dir: str = setting("--results-dir")
    run_id: str | None = setting("--run-id")
    seed: int = setting("--seed")  # the suites' seed; `specsuite bench`'s own --seed (bench_serving's) is its BenchConfig's
    profile: str = setting("--profile")
    fault_policy: str = setting("--fault-policy")  # empty: the fault policy's defaults
    prompts: str | None = setting("--prompts")
    alpha: float = setting("--alpha")  # every suite's statistical checks: correctness, lossless, kernel, A/B, nightly regression
    gsm8k: GSM8KSettings = section(GSM8KSettings)
    correctness: CorrectnessSettings = section(CorrectnessSettings)
    integrity: IntegritySettings = section(IntegritySettings)
    lossless: LosslessSettings = section(LosslessSettings)
    kernel: KernelSettings = section(KernelSettings)
    history: HistorySettings = section(HistorySettings)
    bench: BenchSettings = section(BenchSettings)


def option_values(settings: Any) -> dict[str, Any]:
    """A section's values by the flag each is read from."""
    return {item.metadata[OPTION]: getattr(settings, item.name) for item in fields(settings) if OPTION in item.metadata}


def mapped_options() -> dict[str, str]:
    """Every option a RunConfig field is read from, with the field's dotted path (`--lossless-samples`:
    `lossless.pit_requests`)."""
    found = {option.flag: f"server.{option.server_field}" for option in server_options_on("pytest")}
    for item in fields(RunConfig):
        if OPTION in item.metadata:
            found[item.metadata[OPTION]] = item.name
        elif SECTION in item.metadata:
            found.update({inner.metadata[OPTION]: f"{item.name}.{inner.name}" for inner in fields(item.metadata[SECTION])
                          if OPTION in inner.metadata})
    return found


def _given(get: OptionGetter, flag: str, front_end: str) -> Any:
    """The option's value on this front end, None where the front end does not carry it (a verb's flag of the same name
    can mean something else: `specsuite bench --top-p` is one number, `specsuite history --alpha` another test's)."""
    option = find_option(flag)
    if front_end != "pytest" and front_end not in option.front_ends:
        return None
    return get(option.dest_for(front_end))


def _section(cls: type, get: OptionGetter, front_end: str, **built: Any) -> Any:
    """`cls` from the options its fields name (an option not given keeps the table's default), and the fields `built`
    already."""
    values = dict(built)
    for item in fields(cls):
        value = _given(get, item.metadata[OPTION], front_end) if OPTION in item.metadata else None
        if value is not None:
            values[item.name] = _typed(item.metadata[OPTION], value)
    return cls(**values)


def require_reason(required: bool, profile: str | None, front_end: str) -> str | None:
    """The option that forbids the embedded fallback (as this front end names it), or None when it is allowed."""
    if required:
        return "--require-server-url"
    if profile == "nightly":
        return f"{find_option('--profile').flag_on(front_end)} nightly"
    return None


def run_config_from_options(get: OptionGetter, *, front_end: str, api_key: str | None = None,
                            admin_api_key: str | None = None) -> RunConfig:
    """The run configuration from a front end's options (`front_end`: "pytest", "gsm8k", ... for the comma lists)."""
    reason = require_reason(bool(_given(get, "--require-server-url", front_end)), _given(get, "--profile", front_end), front_end)
    # --require-server-url is one of the reasons `require_reason` weighs; the others are read as given.
    given = {option.server_field: get(option.dest_for(front_end)) for option in server_options_on(front_end)
             if option.server_field != "require_server_url"}
    server = ServerOptions(**{name: value for name, value in given.items() if value is not None},
                           require_server_url=reason is not None, require_reason=reason or "--require-server-url",
                           api_key=api_key, admin_api_key=admin_api_key)
    sections = {item.name: _section(item.metadata[SECTION], get, front_end) for item in fields(RunConfig) if SECTION in item.metadata}
    return _section(RunConfig, get, front_end, server=server, **sections)


def _replaced(settings: Any, path: list[str], value: Any) -> Any:
    """`settings` with the field at this dotted path (split) set to `value`."""
    name, *rest = path
    return replace(settings, **{name: _replaced(getattr(settings, name), rest, value) if rest else value})


def with_options(config: RunConfig, given: Mapping[str, Any]) -> RunConfig:
    """`config` with these pytest options' values (by flag, as pytest's parser stores them) in the fields they set;
    --profile nightly refuses the embedded fallback, as it does when a session reads its options."""
    paths = mapped_options()
    for flag, value in given.items():
        config = _replaced(config, paths[flag].split("."), _typed(flag, value))
    reason = require_reason(False, config.profile, "pytest")
    if reason and not config.server.require_server_url:
        config = replace(config, server=replace(config.server, require_server_url=True, require_reason=reason))
    return config
