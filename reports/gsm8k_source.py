"""Which GSM8K set a run used, read from the results: the project's synthetic set must never read as a real score.

The pytest plugin and `specsuite gsm8k` record each GSM8K run's `source` (`--gsm8k-path`); older
results are judged by the run's recorded `--gsm8k-path` option.
"""

from __future__ import annotations

from typing import Any

SYNTHETIC_GSM8K = "synthetic"  # --gsm8k-path's value for the project's own set (harness.workloads.gsm8k.SYNTHETIC_SOURCE)
SYNTHETIC_GSM8K_NOTE = ("GSM8K here is the project's **synthetic** GSM8K-format set, not the real GSM8K: its accuracy shows "
                        "whether answers stay intact between arms, not how good the model is; the real set: `specsuite run --pytest-arg=--gsm8k-path=hf` "
                        "(or `=FILE`; `pytest suites/ --gsm8k-path hf|FILE`).")


def gsm8k_sources(results: dict[str, Any]) -> set[str]:
    """The GSM8K sources the runs used: each run's `source`, else the run's `--gsm8k-path` option (older results)."""
    sources = set()
    for arm in (results.get("arms") or {}).values():
        for repeat in (arm.get("repeats") or []) if isinstance(arm, dict) else []:
            for run in (repeat.get("workloads") or {}).get("gsm8k") or []:
                if isinstance(run, dict):
                    sources.add(str(run.get("source") or _option(results, "--gsm8k-path") or "unknown"))
    return sources


def _option(results: dict[str, Any], flag: str) -> str | None:
    options = [str(o) for o in results.get("pytest_options") or []]
    value = None
    for index, option in enumerate(options):
        if option == flag and index + 1 < len(options):
            value = options[index + 1]
        elif option.startswith(flag + "="):
            value = option.split("=", 1)[1]
    return value


def gsm8k_is_synthetic(results: dict[str, Any]) -> bool:
    return SYNTHETIC_GSM8K in gsm8k_sources(results)


def gsm8k_source_note(results: dict[str, Any]) -> str | None:
    """The line that says GSM8K was the synthetic set (None for the real one, or no GSM8K)."""
    return SYNTHETIC_GSM8K_NOTE if gsm8k_is_synthetic(results) else None
