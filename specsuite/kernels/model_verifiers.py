"""Numpy chain verifiers, correct and with stated defects, behind the SGLang kernel's call: the known
subjects that the distribution family's power and false-alarm rate are measured on
(tools/calibration/kernel_sequence_power.py, tests/kernels/test_kernel_sequence_tests.py).

Written from the papers, not from any engine's code: token verification (Leviathan et al.: accept X
with probability min(1, p(X)/q(X)), else draw from (p - q)+) and block verification (Sun et al. 2024,
Algorithm 2: prefix weights P_i = min(1, P_{i-1} p_i(X_i)/q_i(X_i)), stop weights h_i = R_i / (R_i + 1 -
P_i) with R_i = sum_x (P_i p_{i+1}(x) - q_{i+1}(x))+, h_k = P_k, the longest i with coin_i < h_i wins,
then a draw from (P_tau p - q)+ at the stop, or p at the bonus position).  The coin of step i is the
kernel's uniform_samples[:, i].

Defects (DEFECTS), each a plausible implementation slip:
- ``accept-bias``: token verification accepting when coin * q < 1.25 p;
- ``residual-from-p``: token verification drawing the rejected position's token from p, not (p - q)+;
- ``block-unscaled-residual``: block verification drawing from (p - q)+ instead of (P_tau p - q)+;
- ``block-stop-at-prefix-weight``: block verification stopping with weight P_i instead of h_i;
- ``block-accept-bias``: block verification stopping when coin < 1.25 h_i;
- ``warm-target``: token verification sampling softmax(log p / 1.25) (a scrambled temperature).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from specsuite.kernels.engines.refserver import ENGINE as NUMPY_SAMPLER_ENGINE
from specsuite.kernels.loader import KernelSpec, LoadedKernel

DEFECTS = ("accept-bias", "residual-from-p", "block-unscaled-residual", "block-stop-at-prefix-weight", "block-accept-bias",
           "warm-target")
BLOCK_DEFECTS = ("block-unscaled-residual", "block-stop-at-prefix-weight", "block-accept-bias")


def _draw(rows: np.ndarray, coins: np.ndarray) -> np.ndarray:
    """Inverse CDF per row (float64); a row without mass gives its last id."""
    cdf = np.cumsum(rows, axis=-1)
    drawn = (cdf <= (coins * cdf[:, -1])[:, None]).sum(axis=-1)
    return np.minimum(drawn, rows.shape[-1] - 1)


def _warm(rows: np.ndarray, temperature: float = 1.25) -> np.ndarray:
    warmed = np.where(rows > 0, rows, 0.0) ** (1.0 / temperature)
    return warmed / warmed.sum(axis=-1, keepdims=True)


def token_verify(target: np.ndarray, draft: np.ndarray, ids: np.ndarray, coins: np.ndarray, final: np.ndarray,
                 defect: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(accepted drafts, final ids) per row."""
    batch, steps = ids.shape
    rows = np.arange(batch)
    if defect == "warm-target":
        target = _warm(target)
    scale = 1.25 if defect == "accept-bias" else 1.0
    accepted = np.zeros(batch, dtype=np.int64)
    alive = np.ones(batch, dtype=bool)
    for step in range(steps):
        p = target[rows, step, ids[:, step]]
        q = draft[rows, step, ids[:, step]]
        accept = alive & (q > 0) & (coins[:, step] * q < scale * p)
        accepted += accept
        alive &= accept
    at = target[rows, accepted]
    residual = np.where((accepted == steps)[:, None], at,
                        np.maximum(at - draft[rows, np.minimum(accepted, steps - 1)], 0.0))
    if defect == "residual-from-p":
        residual = at
    return accepted, _draw(residual, final)


def block_verify(target: np.ndarray, draft: np.ndarray, ids: np.ndarray, coins: np.ndarray, final: np.ndarray,
                 defect: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(accepted drafts, final ids) per row, by block verification."""
    batch, steps = ids.shape
    rows = np.arange(batch)
    prefix = np.ones((batch, steps + 1))
    for step in range(steps):
        p = target[rows, step, ids[:, step]]
        q = draft[rows, step, ids[:, step]]
        ratio = np.divide(p, q, out=np.zeros_like(p), where=q > 0)
        prefix[:, step + 1] = np.minimum(prefix[:, step] * ratio, 1.0)
    stop_weight = np.empty((batch, steps + 1))
    residual_mass = np.empty((batch, steps + 1))
    for i in range(1, steps + 1):
        if i == steps:
            stop_weight[:, i] = prefix[:, i]
            continue
        mass = np.maximum(prefix[:, i, None] * target[:, i] - draft[:, i], 0.0).sum(axis=-1)
        residual_mass[:, i] = mass
        denominator = mass + 1.0 - prefix[:, i]
        stop_weight[:, i] = np.divide(mass, denominator, out=np.ones_like(mass), where=denominator > 0)
    if defect == "block-stop-at-prefix-weight":
        stop_weight = prefix.copy()
    if defect == "block-accept-bias":
        stop_weight = 1.25 * stop_weight
    accepted = np.zeros(batch, dtype=np.int64)
    for i in range(steps, 0, -1):
        take = (accepted == 0) & (coins[:, i - 1] < stop_weight[:, i])
        accepted[take] = i
    at = target[rows, accepted]
    scale = prefix[rows, accepted][:, None]
    if defect == "block-unscaled-residual":
        scale = np.ones_like(scale)
    residual = np.where((accepted == steps)[:, None], at,
                        np.maximum(scale * at - draft[rows, np.minimum(accepted, steps - 1)], 0.0))
    return accepted, _draw(residual, final)


def _kernel_signature(defect: str | None) -> Callable[..., None]:
    def sample(predicts: Any, accept_index: Any, accept_token_num: Any, candidates: Any, retrive_index: Any,
               _next_token: Any, _next_sibling: Any, uniform_samples: Any, uniform_final: Any,
               target_probs: Any, draft_probs: Any, *_flags: Any, block_verification: bool = False) -> None:
        import torch

        target = target_probs.cpu().numpy().astype(np.float64)
        draft = draft_probs.cpu().numpy().astype(np.float64)
        ids = candidates[:, 1:].cpu().numpy()
        coins = uniform_samples.cpu().numpy().astype(np.float64)
        final = uniform_final.cpu().numpy().astype(np.float64)
        use_block = bool(block_verification)  # run_chain passes it for a :block spec only
        chosen = block_verify if use_block else token_verify
        row_defect = defect if (defect in BLOCK_DEFECTS) == use_block else None
        accepted, final_ids = chosen(target, draft, ids, coins, final, row_defect)
        slots = retrive_index.cpu().numpy()
        out = predicts.cpu().numpy().copy()
        index = accept_index.cpu().numpy().copy()
        for row, count in enumerate(accepted.tolist()):
            out[slots[row, : count + 1]] = [*ids[row, :count].tolist(), int(final_ids[row])]
            index[row, : count + 1] = slots[row, : count + 1]
        predicts.copy_(torch.as_tensor(out))
        accept_index.copy_(torch.as_tensor(index))
        accept_token_num.copy_(torch.as_tensor(accepted.astype(np.int32)))

    return sample


def model_kernel(block: bool, defect: str | None = None) -> LoadedKernel:
    """A numpy verifier as a LoadedKernel (the reference numpy sampler's engine: it runs through the SGLang call)."""
    if defect is not None and defect not in DEFECTS:
        raise ValueError(f"unknown defect {defect!r}; known: {', '.join(DEFECTS)}")
    spec = KernelSpec(f"numpy-{'block' if block else 'token'}{':' + defect if defect else ''}", NUMPY_SAMPLER_ENGINE, block=block)
    return LoadedKernel(spec, f"numpy {'block' if block else 'token'} verifier{' (' + defect + ')' if defect else ''}",
                        "cpu (numpy)", "cpu", _kernel_signature(defect))
