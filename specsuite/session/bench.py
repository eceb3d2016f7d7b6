"""The one BenchConfig builder of the serving benchmark, for `pytest suites -m perf` and `specsuite bench` alike.

Each front end names what its user chose, in BenchConfig's field names (None: not chosen), read one way from the
options that name a BenchConfig field (`Option.bench_field`, `chosen_by`), and a profile
(specsuite/config/bench_profiles.py) supplies the rest; the rules that depend on the backend (and on the server kind that
offers it, specsuite.server.kinds) are applied here once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from specsuite.config.bench_profiles import BENCH_SERVING, SUITE, BenchProfile
from specsuite.config.option import Option
from specsuite.server import kinds
from specsuite.session.config import OptionGetter, RunConfig, setting_values
from specsuite.session.option_table import options_for


def build_bench_config(chosen: Mapping[str, Any], profile: BenchProfile, *, base_url: str, run_seed: int | None = None,
                       server_kind: str | None = None, api_key: str | None = None, admin_api_key: str | None = None):
    """A BenchConfig: the profile's values, then what the front end's user chose (None: not chosen)."""
    from specsuite.families.bench.runner import BenchConfig

    given = {key: value for key, value in chosen.items() if value is not None}
    defaults = profile.defaults()
    settings = {**defaults, **given}
    settings.setdefault("backend", None)  # none chosen: the server kind's, below
    config = BenchConfig(base_url=base_url, api_key=api_key, admin_api_key=admin_api_key, **settings)
    if config.seed is None:
        config.seed = run_seed if run_seed is not None else 0
    config.backend = config.backend or kinds.named_or_fallback(server_kind).default_bench_backend
    if "flush_cache" not in given and not kinds.kind_of_backend(config.backend).flushes_cache:
        config.flush_cache = False  # e.g. vLLM has no /flush_cache: the accept length is a /metrics delta instead
    if "tokenize_prompt" not in given and (config.dataset_name == "sharegpt" or kinds.bench_backend(config.backend).needs_text_prompts):
        config.tokenize_prompt = False  # ShareGPT turns and chat messages are text
    # The profile's lengths may be fitted to the server's context length; lengths the user chose are not changed. The
    # option table's defaults are the profile's values, so a length equal to the profile's reads as the profile's.
    if "lengths_chosen" not in given:
        config.lengths_chosen = any(key in given and given[key] != defaults[key] for key in ("random_input_len", "random_output_len"))
    return config


def chosen_by(options: Iterable[Option], value_of: Callable[[Option], Any], *, parse: bool) -> dict[str, Any]:
    """What these options chose, in BenchConfig's field names: each option names the field it sets (`Option.bench_field`),
    a switch not given chooses nothing (given: its `bench_when_set`); `parse`: the values are still the parser's text."""
    chosen = {}
    for option in options:
        if option.bench_field is None:
            continue
        value = value_of(option)
        if option.action == "store_true":
            value = option.bench_when_set if value else None
        chosen[option.bench_field] = option.parse_value(value) if parse else value
    return chosen


def chosen_from_pytest(config: RunConfig) -> dict[str, Any]:
    """What the suites' options chose (the --bench-* options, --tokenizer, --seed), read from the run's typed settings
    (profile "suite" supplies the rest)."""
    values = setting_values(config)
    return chosen_by(options_for("pytest"), lambda option: values.get(option.flag), parse=False)


def chosen_from_cli(get: OptionGetter) -> dict[str, Any]:
    """What `specsuite bench`'s bench_serving flags chose (profile "bench_serving" supplies the rest)."""
    return chosen_by(options_for("bench"), lambda option: get(option.dest_for("bench")), parse=True)


__all__ = ["BENCH_SERVING", "SUITE", "build_bench_config", "chosen_by", "chosen_from_cli", "chosen_from_pytest"]
