"""pytest entry point: the `specsuite` option group; hooks and fixtures live in suites/pytest_plugin.py,
and each suite area adds its own options in suites/plugin_<area>.py.

    pytest suites/ --server-url http://node:30000      # a running SGLang server
    pytest suites/ --launch "python -m sglang.launch_server ..."
    pytest suites/                                      # the embedded reference server (fix arm)
"""

from __future__ import annotations

import os

import pytest

pytest_plugins = (
    "suites.pytest_plugin",
    "suites.plugin_integrity",
    "suites.plugin_lossless",
    "suites.plugin_bench",
    "suites.plugin_history",
    "suites.plugin_kernel",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("specsuite", "specsuite: speculative-decoding server checks")
    group.addoption("--server-url", default=os.environ.get("SPECSUITE_SERVER_URL"),
                    help="base URL of a running server (env SPECSUITE_SERVER_URL); the API key comes from SPECSUITE_API_KEY")
    group.addoption("--baseline-url", default=None,
                    help="a baseline server to compare against (the ab suite): same cases on both, exact tests, verdicts")
    group.addoption("--launch", default=None, metavar="CMD",
                    help="start this server command, wait until ready, log to the results folder, tear it down after")
    group.addoption("--launch-url", default=None, metavar="URL",
                    help="URL the --launch command serves on (default: parsed from its --host/--port, else http://127.0.0.1:30000)")
    group.addoption("--launch-timeout", type=float, default=600.0, help="seconds to wait for a launched server (default 600)")
    group.addoption("--arm-name", default=None, help="label for this server in results and A/B reports (default: the reference arm, or 'candidate')")
    group.addoption("--temperatures", default="0,0.6,1.0", help="comma-separated sampling temperatures (default 0,0.6,1.0)")
    group.addoption("--top-p", dest="top_p", default="0.95,1.0", help="comma-separated top_p values (default 0.95,1.0)")
    group.addoption("--profile", choices=("smoke", "nightly"), default="smoke", help="token budget per case (default smoke)")
    group.addoption("--results-dir", default="specsuite-results", help="where per-run result folders go (default ./specsuite-results)")
    group.addoption("--run-id", default=None, help="name of this run's results folder (default: UTC time plus a suffix)")
    group.addoption("--tokenizer", default=None, help="local tokenizer folder (default: the server's tokenizer_path, if it exists here)")
    group.addoption("--vocab-size", type=int, default=None, help="the model's vocab_size (embedding rows); overrides config.json")
    group.addoption("--prompts", default=None, help="JSONL prompt set (default fixtures/data/correctness_prompts.jsonl)")
    group.addoption("--seed", type=int, default=0, help="base seed for per-request sampling seeds (recorded)")
    group.addoption("--alpha", type=float, default=0.001, help="significance level of the suites' statistical checks (default 0.001)")
    group.addoption("--gsm8k-path", default="synthetic",
                    help="GSM8K source: 'synthetic' (the project's set, default), 'hf' (datasets.load_dataset), or a .jsonl/.parquet file")
    group.addoption("--gsm8k-num-questions", type=int, default=200, help="questions per GSM8K run (default 200)")
    group.addoption("--gsm8k-num-shots", type=int, default=5, help="few-shot examples (default 5)")
    group.addoption("--gsm8k-temperatures", default="0", help="comma-separated GSM8K temperatures (default 0)")
    group.addoption("--gsm8k-parallel", type=int, default=16, help="concurrent GSM8K requests (default 16)")
    group.addoption("--gsm8k-shots-from-eval", action="store_true",
                    help="take shots from the evaluated questions, as sglang's few_shot_gsm8k does (default: excluded)")
    group.addoption("--gsm8k-min-accuracy", type=float, default=None, help="fail below this accuracy (SGLang's last-integer rule)")
    group.addoption("--gsm8k-max-invalid", type=float, default=None, help="fail above this invalid fraction")
    group.addoption("--max-stray-per-1200", type=float, default=None, help="optional absolute cap on stray characters per 1200 tokens")
