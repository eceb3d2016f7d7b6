"""The kernel suite's distribution family over many seeds: does any test fire on a correct kernel?

    python tools/calibration/kernel_distribution_seeds.py --kernel sglang==0.5.23 --seeds 20
    python tools/calibration/kernel_distribution_seeds.py --kernel sglang==0.5.23 --seeds 20 --json out.json
    python tools/calibration/kernel_distribution_seeds.py --kernel sglang==0.5.23:block --seeds 10

For each seed it builds the suite's well-formed distribution scenarios (the engine's own: vLLM has more) (the same as
`pytest suites/ -m kernel --kernel-seed SEED`), runs the kernel, and applies the same tests with
Holm's correction at --alpha (default 0.001, the suites' default).  It prints one line per seed
(smallest raw and adjusted p-value, tests fired, kernel seconds) and a summary; with a correct
kernel the expected number of seeds with any firing is at most seeds * alpha.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from specsuite.errors import SpecsuiteError  # noqa: E402
from specsuite.kernels import distribution  # noqa: E402
from specsuite.kernels.inputs import KernelShape  # noqa: E402
from specsuite.kernels.loader import load_kernel  # noqa: E402


def run_seed(kernel, shape: KernelShape, seed: int, rows: int, alpha: float) -> tuple[list[distribution.DistributionTest], float]:
    started = time.perf_counter()
    # The family of specsuite.kernels.suite.KernelSuiteRun.distribution_family, for the same rows and seeds.
    tests, _ = distribution.run_family(kernel, shape, seed, rows, alpha)
    return tests, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", default="sglang==0.5.23")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--rows", type=int, default=distribution.DEFAULT_ROWS)
    parser.add_argument("--alpha", type=float, default=0.001)
    parser.add_argument("--kernel-vocab", type=int, default=8128)
    parser.add_argument("--tokenizer-vocab", type=int, default=None)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--json", default=None, help="write every test of every seed here")
    args = parser.parse_args(argv)
    try:
        kernel = load_kernel(args.kernel)
        shape = KernelShape(batch=args.batch, kernel_vocab=args.kernel_vocab,
                            tokenizer_vocab=args.tokenizer_vocab or args.kernel_vocab)
    except SpecsuiteError as exc:
        print(f"kernel_distribution_seeds: error: {exc}", file=sys.stderr)
        return 2
    print(f"kernel {kernel.label} sha256 {kernel.sha256} on {kernel.device}; shapes {shape.to_dict()}; "
          f"rows {args.rows}; alpha {args.alpha} (Holm over each seed's family)")
    report = []
    seeds_fired = 0
    all_raw = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        tests, seconds = run_seed(kernel, shape, seed, args.rows, args.alpha)
        tested = [t for t in tests if t.p_value is not None]
        fired = [t.name for t in tested if t.rejected]
        seeds_fired += bool(fired)
        all_raw += [t.p_value for t in tested]
        print(f"seed {seed:3d}: {len(tested)} tests, min p {min(t.p_value for t in tested):.4f}, "
              f"min Holm p {min(t.adjusted_p for t in tested):.4f}, fired {fired or 'none'}, {seconds:.1f} s", flush=True)
        report.append({"seed": seed, "seconds": seconds, "tests": [t.to_dict() for t in tests]})
    below = sum(p <= 0.05 for p in all_raw)
    print(f"summary: {seeds_fired}/{args.seeds} seeds with a test firing at alpha {args.alpha}; "
          f"{len(all_raw)} raw p-values, {below} at or below 0.05 ({below / len(all_raw):.3f}, about 0.05 expected under the null)")
    if args.json:
        Path(args.json).write_text(json.dumps({"kernel": kernel.to_dict(), "shape": shape.to_dict(), "alpha": args.alpha,
                                               "rows": args.rows, "seeds": report}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
