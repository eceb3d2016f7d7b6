"""GPU cost of SGLang's chain rejection sampler and of the fix's copy of `draft_probs`
(copied out of the CUDA-graph pool so the pool cannot recycle it before the sampler reads it).

    python tools/calibration/kernel_gpu_timing.py --out /tmp/kernel_gpu.json
    python tools/calibration/kernel_gpu_timing.py --kernels sglang==0.5.20,sglang==0.5.23 --batches 1,8,16,32,64

At GLM-5.2's shapes (5 draft steps, vocab 154880) it times, with CUDA events on device-resident
tensors:
- one call of `chain_speculative_sampling_triton` (one verify step) per kernel and batch size;
- the fix's copy: `draft_probs.clone()`, one (bs, steps, vocab) fp32 tensor per decode step.

Three figures per op: events around each call (host launch latency counts), back to back (the
host's launch rate can still dominate small ops), and CUDA-graph replay (GPU time alone, as in a
server that replays its decode step as a graph).  The copy's share of the ITL uses the last.

Each figure is the median of `--iterations` timed calls after `--warmup` calls, with the 10th
and 90th percentiles.  The copy is also expressed as a share of the reported 2.56 ms median ITL (GLM-5.2) and
against the copy's memory-bandwidth floor (bytes read + written over `--peak-tb-s`, the H200's
4.8 TB/s HBM3e by default), beside the bandwidth a plain device-to-device copy reaches.

Inputs are well-formed (softmax of scaled Gaussian logits, drafts sampled from q) with a fixed
seed, so acceptance sits near what a mediocre draft gives; the kernel's time depends on how
many drafts it verifies and where its CDF search stops, so the row says what was measured.
Needs a GPU; on a machine without one it says so in one line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from specsuite.errors import SpecsuiteError  # noqa: E402
from specsuite.kernels.loader import load_kernel  # noqa: E402

SEED_ITL_MS = 2.56  # the reported median ITL without the copy (GLM-5.2, MI355X, concurrency 1)


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return {"median_ms": statistics.median(ordered), "p10_ms": pick(0.1), "p90_ms": pick(0.9)}


def _time_cuda(torch, call, warmup: int, iterations: int) -> dict[str, float]:
    """Per-call times (events around each call, so launch latency counts when the GPU waits for
    the host) and the back-to-back figure (events around all calls, divided): in a server the op
    is queued behind other work, so the second is the cost it adds to a step."""
    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    samples = []
    for _ in range(iterations):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iterations):
        call()
    end.record()
    end.synchronize()
    return {**_percentiles(samples), "back_to_back_ms": start.elapsed_time(end) / iterations,
            "graph_replay_ms": _time_graph_replay(torch, call, iterations)}


def _time_graph_replay(torch, call, iterations: int, calls_per_graph: int = 20) -> float | None:
    """GPU time alone: `calls_per_graph` calls captured in one CUDA graph, replayed; no host launch
    cost counts (SGLang replays its decode step as a graph).  None where capture is refused."""
    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            call()  # warm the allocator and the kernel cache outside the capture
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(calls_per_graph):
                call()
        graph.replay()
        torch.cuda.synchronize()
        replays = max(1, iterations // calls_per_graph)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(replays):
            graph.replay()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / (replays * calls_per_graph)
    except RuntimeError:
        return None


def _us(ms: float | None) -> str:
    return "-" if ms is None else f"{ms * 1e3:.1f} us"


def _chain_inputs(torch, batch: int, steps: int, vocab: int, seed: int):
    generator = torch.Generator(device="cuda").manual_seed(seed)
    target = torch.softmax(torch.randn(batch, steps + 1, vocab, device="cuda", generator=generator) * 3.0, dim=-1)
    draft = torch.softmax(torch.randn(batch, steps, vocab, device="cuda", generator=generator) * 3.0, dim=-1)
    candidates = torch.zeros(batch, steps + 1, dtype=torch.int64, device="cuda")
    candidates[:, 1:] = torch.multinomial(draft.reshape(-1, vocab), 1, generator=generator).reshape(batch, steps)
    slots = steps + 1
    return {
        "predicts": torch.full((batch * slots,), -1, dtype=torch.int32, device="cuda"),
        "accept_index": torch.full((batch, slots), -1, dtype=torch.int32, device="cuda"),
        "accept_token_num": torch.zeros(batch, dtype=torch.int32, device="cuda"),
        "candidates": candidates,
        "retrive_index": torch.arange(batch * slots, dtype=torch.int64, device="cuda").reshape(batch, slots),
        "unused": torch.full((batch, slots), -1, dtype=torch.int64, device="cuda"),
        "coins": torch.rand(batch, slots, device="cuda", generator=generator),
        "final_coins": torch.rand(batch, device="cuda", generator=generator),
        "target": target.contiguous(),
        "draft": draft.contiguous(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", default="sglang==0.5.20,sglang==0.5.23")
    parser.add_argument("--batches", default="1,8,16,32,64")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--vocab", type=int, default=154880)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--peak-tb-s", type=float, default=4.8, help="HBM bandwidth the copy is held against (H200: 4.8)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("kernel_gpu_timing: needs torch with a GPU", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("kernel_gpu_timing: no GPU visible to torch; this benchmark times CUDA/ROCm kernels only", file=sys.stderr)
        return 2
    try:
        kernels = [load_kernel(text.strip()) for text in args.kernels.split(",") if text.strip()]
        batches = [int(b) for b in args.batches.split(",") if b.strip()]
    except (SpecsuiteError, ValueError) as exc:
        print(f"kernel_gpu_timing: {exc}", file=sys.stderr)
        return 2

    rows = []
    for batch in batches:
        inputs = _chain_inputs(torch, batch, args.steps, args.vocab, args.seed)
        copy_bytes = inputs["draft"].numel() * inputs["draft"].element_size()
        copy = _time_cuda(torch, lambda inputs=inputs: inputs["draft"].clone(), args.warmup, args.iterations)
        buffer = torch.empty_like(inputs["draft"])
        copy_into = _time_cuda(torch, lambda buffer=buffer, inputs=inputs: buffer.copy_(inputs["draft"]), args.warmup, args.iterations)
        floor_ms = 2 * copy_bytes / (args.peak_tb_s * 1e12) * 1e3  # read + write
        queued = copy["graph_replay_ms"] or copy["back_to_back_ms"]
        row = {"batch": batch, "steps": args.steps, "vocab": args.vocab, "draft_probs_bytes": copy_bytes,
               "copy": {**copy, "share_of_seed_itl": copy["median_ms"] / SEED_ITL_MS,
                        "graph_share_of_seed_itl": queued / SEED_ITL_MS,
                        "bandwidth_floor_ms": floor_ms, "achieved_tb_s": 2 * copy_bytes / (queued * 1e-3) / 1e12},
               "copy_into_preallocated": copy_into,
               "kernels": {}}
        for kernel in kernels:
            i = inputs

            def call(kernel=kernel, i=i) -> None:
                kernel.function(i["predicts"], i["accept_index"], i["accept_token_num"], i["candidates"], i["retrive_index"],
                                i["unused"], i["unused"], i["coins"], i["final_coins"], i["target"], i["draft"], 1.0, 1.0, True)

            timing = _time_cuda(torch, call, args.warmup, args.iterations)
            accepted = i["accept_token_num"].float().mean().item()
            row["kernels"][kernel.label] = {**timing, "mean_accepted_drafts": accepted, "sha256": kernel.sha256}
        rows.append(row)
        kernel_text = "  ".join(f"{label} {k['median_ms'] * 1e3:.1f} us (graph {_us(k['graph_replay_ms'])})"
                                for label, k in row["kernels"].items())
        print(f"bs={batch:3d} {copy_bytes / 1e6:6.1f} MB  copy {copy['median_ms'] * 1e3:6.1f} us, graph {queued * 1e3:6.1f} us "
              f"({row['copy']['graph_share_of_seed_itl']:.2%} of {SEED_ITL_MS} ms; floor {floor_ms * 1e3:.1f} us, "
              f"{row['copy']['achieved_tb_s']:.2f} TB/s)  {kernel_text}")

    # A large device-to-device copy: the bandwidth this GPU reaches when launch cost does not count.
    big = torch.empty(2 * 1024**3 // 4, dtype=torch.float32, device="cuda")
    big_copy = _time_cuda(torch, lambda: big.clone(), 3, 20)
    big_tb_s = 2 * big.numel() * 4 / (big_copy["median_ms"] * 1e-3) / 1e12
    print(f"reference: a 2 GiB device copy reaches {big_tb_s:.2f} TB/s (read + write)")
    result = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "seed": args.seed,
              "kernels": [k.to_dict() for k in kernels], "rows": rows, "large_copy_tb_s": big_tb_s,
              "peak_tb_s": args.peak_tb_s, "iterations": args.iterations, "warmup": args.warmup}
    try:
        import triton

        result["triton"] = triton.__version__
    except ImportError:
        pass
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
