"""Which GSM8K set a run used, read from the results: the project's synthetic set must never read as a real score.

The pytest plugin and `specsuite gsm8k` record each GSM8K run's `source` (`--gsm8k-path`); older
results are judged by the run's recorded `--gsm8k-path` option.
"""

from __future__ import annotations

from specsuite.results.types import Document

SYNTHETIC_GSM8K = "synthetic"  # --gsm8k-path's value for the project's own set (specsuite.families.gsm8k.SYNTHETIC_SOURCE)
SYNTHETIC_GSM8K_NOTE = ("GSM8K here is the project's **synthetic** GSM8K-format set, not the real GSM8K: its accuracy shows "
                        "whether answers stay intact between arms, not how good the model is; the real set: `specsuite run --pytest-arg=--gsm8k-path=hf` "
                        "(or `=FILE`; `pytest suites/ --gsm8k-path hf|FILE`; `hf` and .parquet need the `hf` extra: "
                        "`pip install 'specsuite[hf]'`).")


def gsm8k_sources(results: Document) -> set[str]:
    """The GSM8K sources the runs used: each run's `source`, else the run's `--gsm8k-path` option (older results)."""
    return results.gsm8k_sources()


def gsm8k_is_synthetic(results: Document) -> bool:
    return SYNTHETIC_GSM8K in gsm8k_sources(results)


def gsm8k_source_note(results: Document) -> str | None:
    """The line that says GSM8K was the synthetic set (None for the real one, or no GSM8K)."""
    return SYNTHETIC_GSM8K_NOTE if gsm8k_is_synthetic(results) else None
