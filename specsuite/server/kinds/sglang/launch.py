"""Start a real SGLang release on this CPU as a server under test: its command line, environment and install.

`specsuite serve-sglang --sglang-version 0.5.23 --method eagle` (and the CI's SGLang job) build their
command here. The release comes from the package index, installed by
specsuite/fixtures/sglang_cpu_ops/install_sglang.sh into SGLANG_DIR/sglang-VERSION; the `sgl_kernel` ops under it
are the project's own PyTorch code (specsuite/fixtures/sglang_cpu_ops), put on the server's PYTHONPATH with an
import-only torchvision. Everything above the kernels is SGLang's: HTTP API, tokenizer manager,
scheduler, EAGLE worker, stop and finish logic, detokenizer, streaming, /metrics.

The flags the suites need are always set: `--enable-metrics` (the server-wide counters), the project's
tiny Llama served in float32 (so greedy ids can equal Hugging Face's exactly), a KV pool of 16,384 tokens
(SGLang would size it from the machine's memory) under a memory fraction of 0.3 (SGLang measures the free
memory before and after loading the weights, so a second server loading at the same time must not make the
first look out of memory: at 0.05 that happened here), and for `eagle` the project's EAGLE head converted for
SGLang with a 3-step chain (topk 1, 4 draft tokens: the ops implement chains). Arguments after `--`
go to SGLang as they are.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from specsuite.errors import SpecsuiteError
from specsuite.project_paths import FIXTURES_DIR, PROJECT_ROOT, python_path_with

CPU_OPS = FIXTURES_DIR / "sglang_cpu_ops"
CPU_OPS_SITE = CPU_OPS / "site"  # sgl_kernel (the project's ops), the torchvision stand-in, the AMX-probe hook
INSTALLER = CPU_OPS / "install_sglang.sh"
TARGET_MODEL = FIXTURES_DIR / "vllm_models" / "target"
SERVED_RELEASES = ("0.5.20", "0.5.23")
METHODS = ("eagle", "none")
SGLANG_DIR_ENV = "SPECSUITE_SGLANG_DIR"
DEFAULT_SGLANG_DIR = PROJECT_ROOT / ".sglang"
# The ops' line in the server log (specsuite/fixtures/sglang_cpu_ops/site/sgl_kernel/__init__.py): proof the project's ops served.
OPS_BANNER = "specsuite: sgl_kernel is the project's PyTorch CPU ops"
EAGLE_ARGS = ("--speculative-algorithm", "EAGLE", "--speculative-eagle-topk", "1", "--speculative-num-steps", "3",
              "--speculative-num-draft-tokens", "4")
# --sleep-on-idle: an idle scheduler otherwise spins a whole core polling its sockets; with it the scheduler waits on
# them (up to 1 s, woken by any request: srt/managers/scheduler_components/idle_sleeper.py IdleSleeper.maybe_sleep in
# 0.5.20 and 0.5.23). On 2 cores an idle EAGLE server beside a busy reference took half the machine.
SMALL_MACHINE_ARGS = ("--device", "cpu", "--dtype", "float32", "--max-total-tokens", "16384", "--mem-fraction-static", "0.3", "--enable-metrics",
                      "--sleep-on-idle")
SERVER_ENV = {"SGLANG_USE_CPU_ENGINE": "1", "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


def sglang_dir(explicit: str | None = None) -> Path:
    """Where the releases are installed: --sglang-dir, else SPECSUITE_SGLANG_DIR, else .sglang in the checkout."""
    return Path(explicit or os.environ.get(SGLANG_DIR_ENV) or DEFAULT_SGLANG_DIR).resolve()


def install_hint(version: str, directory: Path) -> str:
    return f"install it with: {INSTALLER.relative_to(PROJECT_ROOT)} {directory} {version}"


def release_venv(version: str, directory: Path) -> Path:
    """The venv of an installed release; one line naming the install command otherwise."""
    if version not in SERVED_RELEASES:
        raise SpecsuiteError(f"SGLang {version} is not served: the project's CPU ops follow the call sites of "
                             f"{' and '.join(SERVED_RELEASES)}")
    venv = directory / f"sglang-{version}"
    if not (venv / ".specsuite-complete").is_file() or not (venv / "bin" / "python").is_file():
        raise SpecsuiteError(f"SGLang {version} is not installed in {directory}: {install_hint(version, directory)}")
    return venv


def sglang_command(venv: Path, method: str, *, port: int, host: str = "127.0.0.1", extra_args: Sequence[str] = ()) -> list[str]:
    """The argv that serves the project's tiny Llama with SGLang, with EAGLE or without speculation."""
    if method not in METHODS:
        raise SpecsuiteError(f"unknown SGLang speculation method {method!r}: choose one of {', '.join(METHODS)}")
    command = [str(venv / "bin" / "python"), "-m", "sglang.launch_server", "--model-path", str(TARGET_MODEL),
               "--host", host, "--port", str(port), *SMALL_MACHINE_ARGS]
    if method == "eagle":
        command += [*EAGLE_ARGS, "--speculative-draft-model-path", str(venv / "specsuite-eagle")]
    return command + list(extra_args)


def sglang_env() -> dict[str, str]:
    """The server's environment additions: the project's ops first on PYTHONPATH (the caller's other values win)."""
    env = {name: os.environ.get(name, value) for name, value in SERVER_ENV.items()}
    env["PYTHONPATH"] = python_path_with(CPU_OPS_SITE)
    return env


def install_release(version: str, directory: Path, timeout_s: float = 1800.0) -> None:
    """Run the installer (idempotent); its own one-line message on failure."""
    done = subprocess.run(["bash", str(INSTALLER), str(directory), version], capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise SpecsuiteError(lines[-1] if lines else f"installing SGLang {version} failed (exit {done.returncode})")
