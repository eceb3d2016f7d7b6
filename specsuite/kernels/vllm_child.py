"""The child half of the vLLM sampler: run in the vLLM environment's Python, it calls vLLM's own
`apply_sampling_constraints` and `rejection_sample` (vllm/v1/sample/rejection_sampler.py) on inputs the
parent (specsuite.kernels.vllm_sampler, in the project's Python, which has no vLLM) writes to .npz files.

Self-contained on purpose: the vLLM environment has numpy, torch and vLLM but not this project, so this
file imports nothing from `harness` and is run as a script, never imported by the parent.

Protocol (one JSON object per line; vLLM's own log lines go to stderr, never into the protocol):
- after start-up: {"ready": true, "vllm": VERSION, "torch": VERSION, "device": TEXT, "expand": TEXT};
  or {"ready": false, "error": ONE_LINE};
- parent -> child: {"op": "sample", "input": PATH.npz, "output": PATH.npz}; child -> parent:
  {"ok": true, "seconds": S} once the output file is complete, or {"ok": false, "error": ONE_LINE};
- parent -> child: {"op": "exit"}, or end of input: the child exits 0.

Input arrays: target_logits (B, k, V) float32 (the draft positions' target logits before temperature and
top-p), draft_ids (B, k) int64, bonus_ids (B,) int64, temperature (B,) float32 (0 = greedy), seeds (B,)
int64 (one torch.Generator per row: vLLM's per-request seeding), optional draft_probs (B, k, V) float32
and top_p (B,) float32.  Output: output_token_ids (B, k+1) int64, -1 past the committed tokens (vLLM's
PLACEHOLDER_TOKEN_ID).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
import traceback


def _one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".replace("\n", " ")[:500]


def _load_patch(path: str) -> str:
    """Load the corrected-expand module by path and apply it in this process (its `apply()`)."""
    spec = importlib.util.spec_from_file_location("specsuite_expand_fix_child", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load the expand patch {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not module.apply():
        raise RuntimeError(f"the expand patch {path} did not take effect (its self-check failed)")
    return f"corrected ({os.path.basename(path)})"


def _metadata(torch, temperature, top_p, seeds, device):
    from vllm.v1.sample.logits_processor import LogitsProcessors
    from vllm.v1.sample.metadata import SamplingMetadata

    batch = temperature.shape[0]
    greedy = temperature == 0.0
    generators = {row: torch.Generator(device=device).manual_seed(int(seed)) for row, seed in enumerate(seeds.tolist())}
    return SamplingMetadata(
        temperature=torch.as_tensor(temperature, dtype=torch.float32, device=device),
        all_greedy=bool(greedy.all()), all_random=bool((~greedy).all()),
        top_p=None if top_p is None else torch.as_tensor(top_p, dtype=torch.float32, device=device),
        top_k=None, generators=generators, max_num_logprobs=None, no_penalties=True, prompt_token_ids=None,
        frequency_penalties=torch.zeros(batch, device=device), presence_penalties=torch.zeros(batch, device=device),
        repetition_penalties=torch.ones(batch, device=device), output_token_ids=[[] for _ in range(batch)],
        allowed_token_ids_mask=None, bad_words_token_ids={}, logitsprocs=LogitsProcessors())


def _sample(np, torch, rs, request: dict, device: str) -> float:
    started = time.perf_counter()
    with np.load(request["input"]) as arrays:
        data = {name: arrays[name] for name in arrays.files}
    batch, steps, vocab = data["target_logits"].shape
    metadata = _metadata(torch, data["temperature"], data.get("top_p"), data["seeds"], device)
    cu = torch.arange(1, batch + 1, dtype=torch.int32, device=device) * steps
    logits = torch.as_tensor(data["target_logits"].reshape(batch * steps, vocab), device=device).contiguous()
    draft_probs = data.get("draft_probs")
    if draft_probs is not None:
        draft_probs = torch.as_tensor(draft_probs.reshape(batch * steps, vocab), device=device).contiguous()
    # What RejectionSampler.forward does with the draft positions' logits (rejection_sampler.py:182-200):
    # temperature and top-p first, then the rejection sampler proper.
    processed = rs.apply_sampling_constraints(logits, cu, metadata)
    out = rs.rejection_sample(
        torch.as_tensor(data["draft_ids"].reshape(-1), dtype=torch.int32, device=device).contiguous(),
        [steps] * batch, steps, cu, draft_probs, processed,
        torch.as_tensor(data["bonus_ids"].reshape(batch, 1), dtype=torch.int32, device=device).contiguous(), metadata)
    partial = request["output"] + ".partial.npz"
    np.savez(partial, output_token_ids=out.to(torch.int64).cpu().numpy())
    os.replace(partial, request["output"])
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--expand-patch", default=None, help="path of the corrected-expand module to apply")
    args = parser.parse_args()
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything vLLM prints goes to stderr, not into the protocol
    sys.stdout = sys.stderr

    def say(message: dict) -> None:
        protocol.write(json.dumps(message) + "\n")
        protocol.flush()

    try:
        import numpy as np
        import torch
        import vllm
        from vllm.platforms import current_platform

        device = "cuda" if torch.cuda.is_available() else "cpu"
        # The CPU worker registers vLLM's C++ replacements of the Triton kernels before sampling
        # (vllm/v1/worker/worker_base.py:282 -> vllm/platforms/cpu.py:670); the same here.  With Triton
        # present (a GPU build) the call returns without registering anything.
        current_platform.register_triton_kernel_overrides()
        expand = "stock"
        if args.expand_patch:
            expand = _load_patch(args.expand_patch)
        from vllm.triton_utils import HAS_TRITON
        from vllm.v1.sample import rejection_sampler as rs

        where = f"cuda:0 ({torch.cuda.get_device_name(0)})" if device == "cuda" else "cpu"
        kernels = "Triton kernels" if HAS_TRITON else "C++ CPU fallbacks (Triton has no CPU backend)"
        say({"ready": True, "vllm": vllm.__version__, "torch": torch.__version__, "device": f"{where}, {kernels}",
             "expand": expand, "module": rs.__file__})
    except Exception as exc:  # noqa: BLE001 -- any start-up failure is one line for the parent
        say({"ready": False, "error": _one_line(exc)})
        return 1
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            if request.get("op") == "exit":
                break
            if request.get("op") != "sample":
                raise ValueError(f"unknown op {request.get('op')!r}")
            say({"ok": True, "seconds": _sample(np, torch, rs, request, device)})
        except Exception as exc:  # noqa: BLE001
            traceback.print_exc(file=sys.stderr)
            say({"ok": False, "error": _one_line(exc)})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
