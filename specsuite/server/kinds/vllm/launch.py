"""Start vLLM as a server under test: the command line for a speculation method, and the wait.

`specsuite serve-vllm --method eagle --port 8141` (and the CI job) build their vLLM command here.
The flags the suites need are always set: `--per-request-spec-decode-metrics detailed` (the
per-request acceptance stats; vLLM refuses it without speculation, so not for `none`) and the
project's small-machine settings (`--enforce-eager --dtype float32 --max-model-len 1024
--max-num-seqs 8`, `VLLM_CPU_KVCACHE_SPACE=1`, `HF_HUB_OFFLINE=1`). Each method's config is the
project's own models (specsuite/fixtures/vllm_models) unless `--model`/`--spec-model` say otherwise;
`--spec-config JSON` keys are merged over the method's, and arguments after `--` go to vLLM as
they are, so a user can test their own configuration.

vLLM need not be importable by this Python: `--vllm-python` (or SPECSUITE_VLLM_PYTHON) names the
interpreter of the environment that has it (the `vllm` console script does not work for the
vllm-cpu distribution; `python -m vllm.entrypoints.openai.api_server` does). Without one, a single
line says how to install it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from specsuite.errors import SpecsuiteError
from specsuite.project_paths import FIXTURES_DIR

VLLM_MODELS = FIXTURES_DIR / "vllm_models"  # the project's tiny target, draft and EAGLE head (data, not code)
SERVED_MODEL_NAME = "specsuite-tiny-llama"
VLLM_PYTHON_ENV = "SPECSUITE_VLLM_PYTHON"
METHODS = ("eagle", "draft_model", "ngram", "none")
NUM_SPECULATIVE_TOKENS = 3
SMALL_MACHINE_ARGS = ("--enforce-eager", "--dtype", "float32", "--max-model-len", "1024", "--max-num-seqs", "8")
SERVER_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
INSTALL_HINT = ("vLLM is not installed for this Python: install it in its own environment with "
                "specsuite/fixtures/vllm_models/install_vllm.sh .venv-vllm (README: Installing vLLM on CPU), then name its interpreter "
                f"with --vllm-python or {VLLM_PYTHON_ENV}=$PWD/.venv-vllm/bin/python")


def speculative_config(method: str, spec_model: str | None = None, overrides: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """`--speculative-config` for a method (None for `none`), with `overrides` merged over it."""
    if method not in METHODS:
        raise SpecsuiteError(f"unknown vLLM speculation method {method!r}: choose one of {', '.join(METHODS)}")
    if method == "none":
        if overrides:
            raise SpecsuiteError("--spec-config needs a speculation method; --method none runs without speculation")
        return None
    config: dict[str, Any] = {"method": method, "num_speculative_tokens": NUM_SPECULATIVE_TOKENS}
    if method == "eagle":
        config["model"] = spec_model or str(VLLM_MODELS / "eagle")
    elif method == "draft_model":
        config["model"] = spec_model or str(VLLM_MODELS / "draft")
    else:  # ngram: prompt lookup, no model
        config.update(prompt_lookup_min=2, prompt_lookup_max=4)
    config.update(overrides or {})
    return config


def find_vllm_python(explicit: str | None = None) -> str:
    """The interpreter that runs vLLM: --vllm-python, else SPECSUITE_VLLM_PYTHON, else this one
    when it can import vllm; a one-line error naming the fix otherwise."""
    chosen = explicit or os.environ.get(VLLM_PYTHON_ENV)
    if chosen:
        path = shutil.which(chosen) or chosen
        if not Path(path).is_file():
            raise SpecsuiteError(f"--vllm-python {chosen!r} is not a file")
        probe = subprocess.run([path, "-c", "import vllm"], capture_output=True, timeout=300)
        if probe.returncode != 0:
            raise SpecsuiteError(f"{chosen} cannot import vllm: {INSTALL_HINT}")
        return path
    if importlib.util.find_spec("vllm") is None:
        raise SpecsuiteError(INSTALL_HINT)
    return sys.executable


def vllm_command(python: str, method: str, *, port: int, host: str = "127.0.0.1", model: str | None = None,
                 spec_model: str | None = None, spec_overrides: dict[str, Any] | None = None,
                 extra_args: Sequence[str] = ()) -> list[str]:
    """The argv that serves `model` (default: the project's tiny target) with one speculation method."""
    command = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", model or str(VLLM_MODELS / "target"),
               "--served-model-name", SERVED_MODEL_NAME, "--host", host, "--port", str(port), *SMALL_MACHINE_ARGS]
    config = speculative_config(method, spec_model, spec_overrides)
    if config is not None:
        command += ["--speculative-config", json.dumps(config), "--per-request-spec-decode-metrics", "detailed"]
    return command + list(extra_args)


def vllm_env() -> dict[str, str]:
    """The server's environment additions (the caller's values win)."""
    return {name: os.environ.get(name, value) for name, value in SERVER_ENV.items()}
