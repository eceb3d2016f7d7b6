"""vLLM's rejection sampler behind the kernel suite's call, run in the vLLM environment's Python.

The project's Python has no vLLM (its pins clash with the project's torch), so the sampler runs in a
child process (specsuite/kernels/vllm_child.py, run as a script by the vLLM Python): started once per
suite run, fed one .npz per call, answered with one .npz.  Which Python: SPECSUITE_VLLM_PYTHON, else
the project's `.venv-vllm` (specsuite/fixtures/vllm_models/install_vllm.sh), else this Python when it can import
vllm.

The suite's input (target and draft probabilities, drafted ids, coins) becomes vLLM's: target logits
log p (a zero probability becomes a logit 240 below the row's best, where float32 softmax gives exactly
0, as a real model's masked rows do), per-row temperature and top-p in `SamplingMetadata`, one seeded
torch.Generator per row (vLLM's per-request seeds; the seed is derived from the row's coins, so a row
rerun alone gets the same seed), and a bonus token drawn by us from the processed target at the last
position with the row's final coin (vLLM draws it outside `rejection_sample`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from specsuite.errors import SpecsuiteError
from specsuite.kernel_loading.outcome import ChainOutcome
from specsuite.kernels.child_messages import ChildAnswer, ChildReady, sampled_token_ids
from specsuite.kernels.inputs import ChainInput, masked_logits, sampling_targets
from specsuite.project_paths import FIXTURES_DIR, PROJECT_ROOT

VLLM_PYTHON_ENV = "SPECSUITE_VLLM_PYTHON"
CHILD = Path(__file__).with_name("vllm_child.py")
# The vLLM job's corrected CPU expand (specsuite/fixtures/vllm_patches, docs/findings/vllm-spec-padded-ids.md).
EXPAND_PATCH = FIXTURES_DIR / "vllm_patches" / "expand_fix" / "specsuite_expand_fix.py"
EXPAND_PATCH_ENV = "SPECSUITE_VLLM_EXPAND_PATCH"
START_TIMEOUT_S = 300.0  # importing vLLM takes 20-60 s on a small CPU machine
CALL_TIMEOUT_S = 300.0


def default_vllm_python() -> str | None:
    """SPECSUITE_VLLM_PYTHON, else the project's .venv-vllm, else this Python if it has vLLM; None when none."""
    chosen = os.environ.get(VLLM_PYTHON_ENV)
    if chosen:
        return chosen
    local = PROJECT_ROOT / ".venv-vllm" / "bin" / "python"
    if local.is_file():
        return str(local)
    return sys.executable if importlib.util.find_spec("vllm") is not None else None


def expand_patch_path() -> Path:
    return Path(os.environ.get(EXPAND_PATCH_ENV) or EXPAND_PATCH)


def target_logits(data: ChainInput) -> np.ndarray:
    """(B, k, V) float32 logits whose softmax is the draft positions' target rows."""
    return masked_logits(data.target_probs[:, : data.draft_ids.shape[1]]).astype(np.float32)


def row_seeds(data: ChainInput) -> np.ndarray:
    """One generator seed per row, from the row's own coins (stable when the row is rerun alone)."""
    seeds = []
    for row in range(data.batch):
        digest = hashlib.sha256(data.accept_coins[row].tobytes() + data.final_coins[row : row + 1].tobytes()).digest()
        seeds.append(int.from_bytes(digest[:7], "little"))
    return np.array(seeds, dtype=np.int64)


def bonus_ids(data: ChainInput, targets: np.ndarray) -> np.ndarray:
    """The bonus token per row: the last position's processed target, by inverse CDF at the final coin
    (the argmax on a greedy row)."""
    last = targets[:, -1]
    cdf = np.cumsum(last, axis=-1)
    drawn = (cdf <= (data.final_coins.astype(np.float64) * cdf[:, -1])[:, None]).sum(axis=-1)
    drawn = np.minimum(drawn, last.shape[-1] - 1)
    if data.temperature is not None:
        drawn = np.where(data.temperature == 0.0, last.argmax(axis=-1), drawn)
    return drawn.astype(np.int64)


def outcome_from_output(output: np.ndarray) -> ChainOutcome:
    """vLLM's output_token_ids (B, k+1), -1 past the committed tokens, as the suite's outcome."""
    committed = (output >= 0).sum(axis=1)
    accepted = np.maximum(committed - 1, 0).astype(np.int64)
    within = np.arange(output.shape[1])[None, :] < committed[:, None]
    emitted = np.where(within, output, -1).astype(np.int64)
    return ChainOutcome(accepted, emitted, emitted[np.arange(output.shape[0]), accepted])


@dataclass
class VllmChild:
    """One child process and its protocol."""

    python: str
    expand_patch: Path | None
    process: subprocess.Popen[str] | None = None
    ready: ChildReady | None = None
    workdir: tempfile.TemporaryDirectory[str] | None = None
    calls: int = 0

    def start(self) -> ChildReady:
        self.workdir = tempfile.TemporaryDirectory(prefix="specsuite-vllm-")
        command = [self.python, "-u", str(CHILD)]
        if self.expand_patch is not None:
            command += ["--expand-patch", str(self.expand_patch)]
        log = open(Path(self.workdir.name) / "child.log", "w")  # noqa: SIM115 -- kept open for the child's life
        env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "TRITON_INTERPRET")}
        try:
            self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
                                            env=env, start_new_session=True)
        except OSError as exc:
            raise SpecsuiteError(f"cannot start the vLLM Python {self.python}: {exc.strerror}") from None
        ready = ChildReady.parse(self._read(START_TIMEOUT_S, "starting vLLM"))
        if not ready.ready:
            self.close()
            raise SpecsuiteError(f"vLLM ({self.python}) did not start its sampler: {ready.failure}")
        self.ready = ready
        return ready

    def log_tail(self, lines: int = 5) -> str:
        if self.workdir is None:
            return ""
        path = Path(self.workdir.name) / "child.log"
        text = path.read_text(errors="replace").strip().splitlines() if path.is_file() else []
        return " | ".join(text[-lines:])

    def _read(self, timeout: float, doing: str) -> dict[str, Any]:
        assert self.process is not None and self.process.stdout is not None
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                raise SpecsuiteError(f"the vLLM sampler process did not answer in {timeout:.0f} s while {doing}")
            readable, _, _ = select.select([self.process.stdout], [], [], min(left, 1.0))
            if readable:
                line = self.process.stdout.readline()
                if not line:
                    code = self.process.wait(timeout=10)
                    tail = self.log_tail()
                    raise SpecsuiteError(f"the vLLM sampler process exited ({code}) while {doing}: {tail[-400:]}")
                try:
                    return json.loads(line)
                except json.JSONDecodeError:
                    continue  # not a protocol line

    def sample(self, arrays: dict[str, np.ndarray]) -> np.ndarray:
        if self.process is None or self.workdir is None or self.process.poll() is not None:
            raise SpecsuiteError("the vLLM sampler process is not running")
        assert self.process.stdin is not None
        self.calls += 1
        request = Path(self.workdir.name) / f"in-{self.calls}.npz"
        answer = Path(self.workdir.name) / f"out-{self.calls}.npz"
        np.savez(request, **arrays)
        self.process.stdin.write(json.dumps({"op": "sample", "input": str(request), "output": str(answer)}) + "\n")
        self.process.stdin.flush()
        outcome = ChildAnswer.parse(self._read(CALL_TIMEOUT_S, "sampling"))
        request.unlink(missing_ok=True)
        if not outcome.ok:
            raise SpecsuiteError(f"vLLM's rejection sampler failed: {outcome.failure}")
        with np.load(answer) as result:
            output = sampled_token_ids(result)
        answer.unlink(missing_ok=True)
        return output

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            try:
                assert self.process.stdin is not None
                self.process.stdin.write(json.dumps({"op": "exit"}) + "\n")
                self.process.stdin.close()
                self.process.wait(timeout=20)
            except (OSError, subprocess.TimeoutExpired, ValueError):
                self.process.kill()
                self.process.wait(timeout=10)
        if self.workdir is not None:
            self.workdir.cleanup()
            self.workdir = None


class VllmRejectionSampler:
    """A callable ChainInput -> ChainOutcome through vLLM's sampler in the child."""

    def __init__(self, child: VllmChild) -> None:
        self.child = child

    def __call__(self, data: ChainInput) -> ChainOutcome:
        targets = sampling_targets(data)
        arrays: dict[str, np.ndarray] = {
            "target_logits": target_logits(data),
            "draft_ids": data.draft_ids.astype(np.int64),
            "bonus_ids": bonus_ids(data, targets),
            "temperature": (np.ones(data.batch) if data.temperature is None else data.temperature).astype(np.float32),
            "seeds": row_seeds(data),
        }
        if data.with_draft_probs:
            arrays["draft_probs"] = np.ascontiguousarray(data.draft_probs, dtype=np.float32)
        if data.top_p is not None:
            arrays["top_p"] = data.top_p.astype(np.float32)
        output = self.child.sample(arrays)
        return outcome_from_output(output)

    def close(self) -> None:
        self.child.close()


def start_vllm_sampler(version: str | None, corrected_expand: bool) -> tuple[VllmRejectionSampler, ChildReady]:
    """Start the child; check the version when one was asked for.  One SpecsuiteError line on failure."""
    python = default_vllm_python()
    if python is None:
        raise SpecsuiteError(f"no vLLM environment: set {VLLM_PYTHON_ENV} to the Python of one "
                             "(specsuite/fixtures/vllm_models/install_vllm.sh .venv-vllm makes it)")
    if not Path(python).is_file():
        raise SpecsuiteError(f"{VLLM_PYTHON_ENV}={python!r} is not a file")
    patch = None
    if corrected_expand:
        patch = expand_patch_path()
        if not patch.is_file():
            raise SpecsuiteError(f"the corrected-expand patch {patch} is missing (set {EXPAND_PATCH_ENV} to its path)")
    child = VllmChild(python, patch)
    ready = child.start()
    if version is not None and ready.vllm != version:
        child.close()
        raise SpecsuiteError(f"--kernel vllm=={version}: the vLLM environment at {python} has vllm {ready.vllm}; "
                             "install the release asked for there, or use --kernel vllm-installed")
    return VllmRejectionSampler(child), ready
