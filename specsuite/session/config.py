"""The typed run configuration, built the same way from pytest's options and from a `specsuite` verb's flags.

Both front ends read their options through the option table's names (specsuite/session/option_table.py), so
`run_config_from_options` takes a getter: pytest's `config.getoption`, or the CLI's `getattr(args, ...)`. An option a
front end does not have reads as None and takes the table's default here; equal options give equal configurations
(tests/session/test_session_config.py).

Every option pytest offers is a field here: each field, RunConfig's own and its sections', names its option in its
metadata (`setting(flag)`, specsuite.config.option.setting_from), takes its default from the option and its value
through the option's parser, all read one way (`_section`); the server's options go to ServerOptions (each names its
field, `Option.server_field`). Each registered workload family brings its own section (`WorkloadFamily.settings`,
declared with its options in specsuite/families/<name>/options.py), held in `RunConfig.families` and read as an
attribute (`config.gsm8k`); this module names no family.
`mapped_options()` lists them all, and tests/session/test_session_config.py fails on a pytest option that is neither mapped
nor listed in `NOT_RUN_SETTINGS`. The suites read these sections (`specsuite.run_config.lossless.pit_requests`), not
pytest's options by name; `specsuite run` hands a whole RunConfig to each child session (specsuite/session/config_file.py),
and `with_options` sets fields by flag where a command line's options join a configuration already built.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from specsuite.config.generic_options import GENERIC_OPTIONS
from specsuite.config.option import DECODE, OPTION, OPTION_OBJECT, Option, setting_from, typed_value
from specsuite.families.registry import families
from specsuite.server.session import ServerOptions
from specsuite.session.option_table import all_options, find_option

OptionGetter = Callable[[str], Any]  # an option's value by its dest name (`gsm8k_num_questions`), None when absent

SECTION = "specsuite_section"  # a RunConfig field's metadata: a section of settings
__all__ = ["DECODE", "OPTION", "SECTION", "RunConfig", "family_sections", "mapped_options", "run_config_from_options", "setting_values",
           "with_options"]


def server_options_on(front_end: str) -> list[Option]:
    """The options of this front end that set a ServerOptions field (a specsuite/server type, so the option names the field)."""
    return [option for option in all_options() if option.server_field and front_end in option.front_ends]


# pytest options that are not settings of a run (flag: why), so RunConfig leaves them out. Adding one here needs a
# reason a reviewer can check.
NOT_RUN_SETTINGS: Mapping[str, str] = {
    "--specsuite-config": "the file holding a whole RunConfig (`specsuite run`'s sessions), not one setting of it",
}


def _typed(flag: str, value: Any) -> Any:
    """A value through the option table's parser (comma lists parsed, as tuples); other options come typed already."""
    return typed_value(find_option(flag), value)


setting = setting_from(GENERIC_OPTIONS)


def section(cls: type) -> Any:
    return field(default_factory=cls, metadata={SECTION: cls})


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


def family_sections() -> dict[str, type]:
    """Each registered family's settings section, by the name RunConfig holds it under (`gsm8k`, `lossless`, ...)."""
    return {family.settings_name: family.settings for family in families() if family.settings is not None}


def _default_family_settings() -> dict[str, Any]:
    return {name: cls() for name, cls in family_sections().items()}


@dataclass(frozen=True)
class RunConfig:
    """Everything a run needs that is not a workload's own setting: the server, where results go, the seed, the
    profile, the fault policy, the significance level; the kernel suite's and the history's sections; and one section
    per registered workload family (`families`, read as attributes: `config.gsm8k.temperatures`)."""

    server: ServerOptions = field(default_factory=ServerOptions)
    baseline_url: str | None = setting("--baseline-url")
    results_dir: str = setting("--results-dir")
    run_id: str | None = setting("--run-id")
    seed: int = setting("--seed")  # the suites' seed; `specsuite bench`'s own --seed (bench_serving's) is its BenchConfig's
    profile: str = setting("--profile")
    fault_policy: str = setting("--fault-policy")  # empty: the fault policy's defaults
    prompts: str | None = setting("--prompts")
    alpha: float = setting("--alpha")  # every suite's statistical checks: correctness, lossless, kernel, A/B, nightly regression
    kernel: KernelSettings = section(KernelSettings)
    history: HistorySettings = section(HistorySettings)
    families: dict[str, Any] = field(default_factory=_default_family_settings)  # a family's settings name -> its section

    def __getattr__(self, name: str) -> Any:
        """A family's settings section as an attribute (`config.lossless`); only called for names that are not fields."""
        sections = self.__dict__.get("families") or {}
        if name in sections:
            return sections[name]
        raise AttributeError(f"RunConfig has no setting or family section {name!r}")

    def with_section(self, name: str, settings: Any) -> RunConfig:
        """This configuration with one family's settings section replaced."""
        if name not in self.families:
            raise KeyError(f"RunConfig has no family section {name!r}")
        return replace(self, families={**self.families, name: settings})


def _taking_sections(init: Callable[..., None]) -> Callable[..., None]:
    """RunConfig's constructor also takes a family's section by its name (`RunConfig(gsm8k=...)`), so that
    `dataclasses.replace(config, lossless=...)` works as it does for a field; a family not given gets its defaults."""
    @functools.wraps(init)
    def __init__(self: RunConfig, *args: Any, families: Mapping[str, Any] | None = None, **given: Any) -> None:
        sections = family_sections()
        built = {**(families or {}), **{name: given.pop(name) for name in list(given) if name in sections}}
        built.update({name: cls() for name, cls in sections.items() if name not in built})
        init(self, *args, families=built, **given)

    return __init__


RunConfig.__init__ = _taking_sections(RunConfig.__init__)  # type: ignore[method-assign]


def option_values(settings: Any) -> dict[str, Any]:
    """A section's values by the flag each is read from."""
    return {item.metadata[OPTION]: getattr(settings, item.name) for item in fields(settings) if OPTION in item.metadata}


def _sections() -> dict[str, type]:
    """Every settings section by its RunConfig name: RunConfig's own fields', then each registered family's."""
    own = {item.name: item.metadata[SECTION] for item in fields(RunConfig) if SECTION in item.metadata}
    return {**own, **family_sections()}


def mapped_options() -> dict[str, str]:
    """Every option a RunConfig field is read from, with the field's dotted path (`--lossless-samples`:
    `lossless.pit_requests`)."""
    found = {option.flag: f"server.{option.server_field}" for option in server_options_on("pytest")}
    found.update({item.metadata[OPTION]: item.name for item in fields(RunConfig) if OPTION in item.metadata})
    for name, cls in _sections().items():
        found.update({inner.metadata[OPTION]: f"{name}.{inner.name}" for inner in fields(cls) if OPTION in inner.metadata})
    return found


def setting_values(config: RunConfig) -> dict[str, Any]:
    """Every mapped option's value in this configuration, by flag."""
    values = {}
    for flag, path in mapped_options().items():
        value: Any = config
        for name in path.split("."):
            value = getattr(value, name)
        values[flag] = value
    return values


def _given(get: OptionGetter, option: Option, front_end: str) -> Any:
    """The option's value on this front end, None where the front end does not carry it (a verb's flag of the same name
    can mean something else: `specsuite bench --top-p` is one number, `specsuite history --alpha` another test's)."""
    if front_end != "pytest" and front_end not in option.front_ends:
        return None
    return get(option.dest_for(front_end))


def _section(cls: type, get: OptionGetter, front_end: str, **built: Any) -> Any:
    """`cls` from the options its fields name (an option not given keeps the option's default), and the fields `built`
    already."""
    values = dict(built)
    for item in fields(cls):
        option = item.metadata.get(OPTION_OBJECT)
        value = _given(get, option, front_end) if option is not None else None
        if value is not None:
            values[item.name] = typed_value(option, value)
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
    reason = require_reason(bool(_given(get, find_option("--require-server-url"), front_end)), _given(get, find_option("--profile"), front_end),
                            front_end)
    # --require-server-url is one of the reasons `require_reason` weighs; the others are read as given.
    given = {option.server_field: get(option.dest_for(front_end)) for option in server_options_on(front_end)
             if option.server_field != "require_server_url"}
    server = ServerOptions(**{name: value for name, value in given.items() if value is not None},
                           require_server_url=reason is not None, require_reason=reason or "--require-server-url",
                           api_key=api_key, admin_api_key=admin_api_key)
    own = {item.name: _section(item.metadata[SECTION], get, front_end) for item in fields(RunConfig) if SECTION in item.metadata}
    built = {name: _section(cls, get, front_end) for name, cls in family_sections().items()}
    return _section(RunConfig, get, front_end, server=server, families=built, **own)


def _replaced(settings: Any, path: list[str], value: Any) -> Any:
    """`settings` with the field at this dotted path (split) set to `value`."""
    name, *rest = path
    if isinstance(settings, RunConfig) and name in settings.families:
        return settings.with_section(name, _replaced(settings.families[name], rest, value))
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
