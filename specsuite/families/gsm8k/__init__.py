"""GSM8K few-shot workload: one import for loading, prompting and scoring, and the server-agnostic runner.

Nothing here talks to a server. The suites and the `specsuite` CLI run GSM8K against a server
through `specsuite.families.gsm8k.on_server.run_gsm8k_on_server`, which wraps `run_gsm8k` (given a `generate`
callable) with the correctness detectors, the cache flush and the fault guard; from this module
they take `load_gsm8k`. The work lives in small modules, re-exported here (some callers, e.g.
`specsuite.analysis.verdicts`, import from them directly):

- ``gsm8k_data``: `load_gsm8k` (Hub, local JSONL/Parquet, or the bundled synthetic set) and `GSM8KItem`;
- ``gsm8k_prompt``: the SGLang ``few_shot_gsm8k`` prompt, stop sequences, and the shot/eval split.
  By default shots are drawn with a seeded RNG and **excluded** from the evaluated questions; the
  anchor instead evaluates its own shots (leakage), reproducible with ``shots_from_eval=True``;
- ``gsm8k_scoring``: answer extraction and outcomes under three named definitions
  (``sglang`` last-integer, ``lmeval_strict`` ``#### N``, ``lmeval_flexible`` last number);
- ``gsm8k_metrics``: accuracy and invalid rate with Wilson and exact intervals, latency,
  throughput, accept length;
- ``gsm8k_runner``: `run_gsm8k`, `GSM8KResult`, and `paired_outcomes` for McNemar between two arms.
"""

from __future__ import annotations

from specsuite.families.gsm8k.data import SYNTHETIC_SOURCE, GSM8KItem, load_gsm8k, synthetic_path
from specsuite.families.gsm8k.metrics import proportion
from specsuite.families.gsm8k.prompt import DEFAULT_MAX_NEW_TOKENS, STOP_SEQUENCES, FewShotPlan, build_prompt, build_request, plan_few_shot
from specsuite.families.gsm8k.runner import GSM8KResult, PairedOutcomes, paired_outcomes, run_gsm8k
from specsuite.families.gsm8k.scoring import (
    DEFINITIONS,
    INVALID,
    Score,
    extract_lmeval_flexible,
    extract_lmeval_strict,
    extract_sglang_last_integer,
    score_output,
)

__all__ = [
    "DEFAULT_MAX_NEW_TOKENS",
    "DEFINITIONS",
    "INVALID",
    "STOP_SEQUENCES",
    "SYNTHETIC_SOURCE",
    "FewShotPlan",
    "GSM8KItem",
    "GSM8KResult",
    "PairedOutcomes",
    "Score",
    "build_request",
    "build_prompt",
    "extract_lmeval_flexible",
    "extract_lmeval_strict",
    "extract_sglang_last_integer",
    "load_gsm8k",
    "paired_outcomes",
    "plan_few_shot",
    "proportion",
    "run_gsm8k",
    "score_output",
    "synthetic_path",
]
