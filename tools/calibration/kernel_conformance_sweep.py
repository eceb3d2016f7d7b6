"""The numpy sampler against the real kernels over many rows, on whatever device torch sees
(tests/kernels/test_kernel_conformance.py is the CI-sized version of this).

    python tools/calibration/kernel_conformance_sweep.py --seeds 4 --batch 64 --vocab 8128
    python tools/calibration/kernel_conformance_sweep.py --seeds 2 --vocab 154880 --tokenizer-vocab 154856

nofix against 0.5.20 and fix against 0.5.23, every input class and the well-formed distribution
chain; prints each pair's tally (defects, float-order ties with their margins) and the kernel time.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from specsuite.kernels.conformance import ConformanceTally, compare  # noqa: E402
from specsuite.kernels.distribution import distribution_input  # noqa: E402
from specsuite.kernels.inputs import CONFORMANCE_ONLY_CLASSES, INPUT_CLASSES, KernelShape, build_input  # noqa: E402
from specsuite.kernels.invoke import run_chain  # noqa: E402
from specsuite.kernels.loader import load_kernel  # noqa: E402

PAIRS = (("refserver:nofix", "sglang==0.5.20", False), ("refserver", "sglang==0.5.23", True))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=8128)
    parser.add_argument("--tokenizer-vocab", type=int, default=None)
    parser.add_argument("--distribution-rows", type=int, default=1024, help="rows of the well-formed distribution chain per seed")
    args = parser.parse_args(argv)
    shape = KernelShape(batch=args.batch, kernel_vocab=args.vocab, tokenizer_vocab=args.tokenizer_vocab or args.vocab)
    for reference_source, real_source, fix_arm in PAIRS:
        reference, real = load_kernel(reference_source), load_kernel(real_source)
        tally = ConformanceTally()
        kernel_seconds = 0.0
        for seed in range(args.seeds):
            inputs = [build_input(name, seed, shape) for name in list(INPUT_CLASSES) + list(CONFORMANCE_ONLY_CLASSES)]
            inputs.append(distribution_input("well-formed", 100 + seed, shape, args.distribution_rows))
            for data in inputs:
                for start in range(0, data.batch, shape.batch):
                    part = data.rows(slice(start, start + shape.batch))
                    started = time.perf_counter()
                    real_outcome = run_chain(real, *part.arrays())
                    kernel_seconds += time.perf_counter() - started
                    compare(part, run_chain(reference, *part.arrays()), real_outcome, fix_arm, tally)
        print(f"{reference.label} vs {real.label} on {real.device}, shapes {shape.to_dict()}: {tally.summary()}; "
              f"kernel {kernel_seconds:.2f} s for {tally.rows} rows", flush=True)
        for disagreement in tally.disagreements[:5]:
            print("   ", disagreement.to_dict())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
