"""The project's patches for a vLLM server (specsuite/fixtures/vllm_patches), and the check that one is active.

A patch is a folder with a `sitecustomize.py`, put first on the server's PYTHONPATH, so every Python
process of the server applies it when vLLM imports its CPU kernel fallbacks; each prints one line to
stderr (the server's log) once active:

- `expand_fix`: the project's corrected CPU expand (docs/findings/vllm-spec-padded-ids.md). A run is
  "corrected" only when its server log holds the activation line; `require_patch_active` says so or
  raises one line.
- `planted_bias`: expand_fix plus acceptance min(1, c*p/q) in the CPU rejection sampler (c from
  SPECSUITE_PLANTED_BIAS_C): a known-broken server for measuring the suites' power.

The prefixes are the patch modules' own (specsuite/fixtures/vllm_patches/*/specsuite_*.py; tests/server/test_vllm_patches.py
checks they agree). The patch modules run in vLLM's environment and import nothing of the project.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from specsuite.errors import SpecsuiteError
from specsuite.project_paths import FIXTURES_DIR, python_path_with

PATCHES_DIR = FIXTURES_DIR / "vllm_patches"
PLANTED_BIAS_C_ENV = "SPECSUITE_PLANTED_BIAS_C"
FAILURE_MARK = "specsuite-vllm-patch FAILED"
LAUNCH_MARK = "=== specsuite: starting"  # specsuite.server.launcher writes it before each start


@dataclass(frozen=True)
class VllmPatch:
    name: str
    folders: tuple[str, ...]  # PYTHONPATH order: the first holds the sitecustomize that runs
    activation_prefix: str

    @property
    def paths(self) -> tuple[Path, ...]:
        return tuple(PATCHES_DIR / folder for folder in self.folders)


PATCHES = {
    "expand_fix": VllmPatch("expand_fix", ("expand_fix",), "specsuite-vllm-patch active: expand_fix"),
    "planted_bias": VllmPatch("planted_bias", ("planted_bias", "expand_fix"), "specsuite-vllm-patch active: planted_bias"),
}
PATCH_CHOICES = ("none", *PATCHES)


def get_patch(name: str) -> VllmPatch:
    if name not in PATCHES:
        raise SpecsuiteError(f"unknown vLLM patch {name!r}: choose one of {', '.join(PATCH_CHOICES)}")
    return PATCHES[name]


def patch_env(name: str, planted_bias_c: float | None = None) -> dict[str, str]:
    """The server's environment additions for a patch: PYTHONPATH first, then the caller's."""
    patch = get_patch(name)
    env = {"PYTHONPATH": python_path_with(*patch.paths)}
    if name == "planted_bias":
        if planted_bias_c is None or not math.isfinite(planted_bias_c) or planted_bias_c <= 0:
            raise SpecsuiteError(f"--patch planted_bias needs --planted-bias-c, a positive number (got {planted_bias_c})")
        env[PLANTED_BIAS_C_ENV] = repr(float(planted_bias_c))
    elif planted_bias_c is not None:
        raise SpecsuiteError("--planted-bias-c goes with --patch planted_bias")
    return env


def activation_lines(log_text: str, name: str) -> list[str]:
    """The patch's activation lines in a server log, from the prefix on (vLLM puts its own prefix, e.g.
    `(EngineCore_DP0 pid=7)`, before what its engine process writes)."""
    prefix = get_patch(name).activation_prefix
    return [line[line.index(prefix):].strip() for line in log_text.splitlines() if prefix in line]


def patch_problem(log_text: str, name: str) -> str | None:
    """None when the log shows the patch active and no patch failure; the one-line problem otherwise."""
    failures = [line.strip() for line in log_text.splitlines() if FAILURE_MARK in line]
    if failures:
        return failures[0]
    if not activation_lines(log_text, name):
        return f"the server log has no {get_patch(name).activation_prefix!r} line: the {name} patch is not active"
    return None


def require_patch_active(log_path: Path, name: str) -> str:
    """The activation line from `log_path`; SpecsuiteError (one line) when the patch is not shown active."""
    try:
        text = Path(log_path).read_text(errors="replace")
    except OSError as exc:
        raise SpecsuiteError(f"cannot read the server log {log_path}: {exc.strerror}") from None
    text = text[text.rfind(LAUNCH_MARK) + 1:] if LAUNCH_MARK in text else text  # this start only: the log is appended to
    problem = patch_problem(text, name)
    if problem:
        raise SpecsuiteError(f"{log_path}: {problem}")
    return activation_lines(text, name)[0]
