"""The lossless family's options and settings: its speculation-off reference and the workload's sizes (LosslessConfig's
names and defaults); and what the main job of `specsuite run` sets (MAIN_JOB). Listed by its FAMILY entry; the table
and RunConfig read them from there (specsuite/session/option_table.py, specsuite/session/config.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from specsuite.config.option import (
    COUNT,
    NON_NEGATIVE,
    SAMPLED_TEMPERATURE,
    TOP_P,
    Alias,
    Option,
    Range,
    count_list,
    parse_number,
    setting_from,
    split_list,
)


def lossless_settings(text: str, option: str) -> list[Any]:
    """'1.0,0.7:0.9' -> SamplingSetting(1.0, 1.0), SamplingSetting(0.7, 0.9): T or T:TOP_P items."""
    from specsuite.families.lossless.workload import SamplingSetting  # numpy and scipy load only when the suite runs

    settings = []
    for item in split_list(text, option):
        temperature_text, _, top_p_text = item.partition(":")
        temperature = parse_number(temperature_text, float, option)
        top_p = parse_number(top_p_text, float, option) if top_p_text else 1.0
        SAMPLED_TEMPERATURE.check(temperature, item, option)
        TOP_P.check(top_p, item, option)
        settings.append(SamplingSetting(temperature, top_p))
    return settings



def _lossless_default(name: str) -> Callable[[], Any]:
    """A size's default: LosslessConfig's (numpy and scipy load only when a parser is built)."""
    def default() -> Any:
        from specsuite.families.lossless.workload import LosslessConfig

        value = getattr(LosslessConfig(), name)
        return ",".join(map(str, value)) if isinstance(value, tuple) else value

    return default


OPTIONS: tuple[Option, ...] = (
    # specsuite/pytest_plugin/lossless.py declares them
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
)
setting = setting_from(OPTIONS)


def _sampling_settings(items: list[dict[str, float]]) -> tuple[Any, ...]:
    from specsuite.families.lossless.workload import SamplingSetting  # numpy and scipy load only when the suite runs

    return tuple(SamplingSetting(**item) for item in items)


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


# The main job's lossless check (specsuite/session/main_job_profiles.py says why): the sampled tests at T=1, the
# two-sample draws at 600 per prompt (3x the default), as the option values a pytest session parses.
MAIN_JOB: tuple[tuple[str, str | int], ...] = (("--lossless-temperatures", "1.0"), ("--lossless-two-sample-size", 600))
