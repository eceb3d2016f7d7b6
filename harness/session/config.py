"""The typed run configuration, built the same way from pytest's options and from a `specsuite` verb's flags.

Both front ends read their options through the option table's names (harness/config/options.py), so
`run_config_from_options` takes a getter: pytest's `config.getoption`, or the CLI's `getattr(args, ...)`. An option a
front end does not have reads as None and takes the table's default here; equal options give equal configurations
(tests/test_session_config.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.config.options import find_option, parse_option
from harness.project_paths import RESULTS_DIR
from harness.server.session import ServerOptions

OptionGetter = Callable[[str], Any]  # an option's value by its dest name (`gsm8k_num_questions`), None when absent


def _default(flag: str) -> Any:
    return find_option(flag).default


@dataclass(frozen=True)
class GSM8KSettings:
    """One GSM8K run per temperature: the data set and how it is asked."""

    path: str = field(default_factory=lambda: _default("--gsm8k-path"))
    num_questions: int = field(default_factory=lambda: _default("--gsm8k-num-questions"))
    num_shots: int = field(default_factory=lambda: _default("--gsm8k-num-shots"))
    parallel: int = field(default_factory=lambda: _default("--gsm8k-parallel"))
    shots_from_eval: bool = False
    temperatures: tuple[float, ...] = ()


@dataclass(frozen=True)
class RunConfig:
    """Everything a run needs that is not a workload's own setting: the server, where results go, the seed, the
    profile, the fault policy and the GSM8K settings."""

    server: ServerOptions = field(default_factory=ServerOptions)
    baseline_url: str | None = None
    results_dir: str = RESULTS_DIR
    run_id: str | None = None
    seed: int = 0
    profile: str = "smoke"
    fault_policy: str | None = None  # None (or pytest's empty default): the fault policy's defaults
    prompts: str | None = None
    gsm8k: GSM8KSettings = field(default_factory=GSM8KSettings)


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


def require_reason(get: OptionGetter) -> str | None:
    """The option that forbids the embedded fallback, or None when it is allowed."""
    if get("require_server_url"):
        return "--require-server-url"
    if get("profile") == "nightly":
        return "--profile nightly"
    return None


def run_config_from_options(get: OptionGetter, *, front_end: str, api_key: str | None = None,
                            admin_api_key: str | None = None) -> RunConfig:
    """The run configuration from a front end's options (`front_end`: "pytest", "gsm8k", ... for the comma lists)."""
    reason = require_reason(get)
    server = ServerOptions(
        server_url=get("server_url"), launch=get("launch"), launch_url=get("launch_url"),
        ready_timeout_s=float(_or(get("launch_timeout"), _default("--launch-timeout"))), arm=get("arm_name"),
        reference_arm=_or(get("reference_arm"), "fix"), tokenizer=get("tokenizer"), vocab_size=get("vocab_size"),
        server_kind=_or(get("server_kind"), _default("--server-kind")), require_server_url=reason is not None,
        require_reason=reason or "--require-server-url", api_key=api_key, admin_api_key=admin_api_key,
    )
    temperatures = get("gsm8k_temperatures")
    gsm8k = GSM8KSettings(
        path=_or(get("gsm8k_path"), _default("--gsm8k-path")),
        num_questions=_or(get("gsm8k_num_questions"), _default("--gsm8k-num-questions")),
        num_shots=_or(get("gsm8k_num_shots"), _default("--gsm8k-num-shots")),
        parallel=_or(get("gsm8k_parallel"), _default("--gsm8k-parallel")),
        shots_from_eval=bool(get("gsm8k_shots_from_eval")),
        temperatures=tuple(parse_option("--gsm8k-temperatures", temperatures, front_end)) if temperatures is not None else (),
    )
    return RunConfig(server=server, baseline_url=get("baseline_url"), results_dir=_or(get("results_dir"), RESULTS_DIR),
                     run_id=get("run_id"), seed=_or(get("seed"), 0), profile=_or(get("profile"), "smoke"),
                     fault_policy=get("fault_policy") or None, prompts=get("prompts"), gsm8k=gsm8k)
