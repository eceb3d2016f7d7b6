"""Power and false-alarm rate of the kernel suite's distribution family, by simulation on numpy
verifiers with stated defects (specsuite/kernels/model_verifiers.py).

    python tools/calibration/kernel_sequence_power.py --sims 100
    python tools/calibration/kernel_sequence_power.py --sims 100 --subjects block block:block-unscaled-residual --json out.json

Each simulation runs the suite's family (specsuite.kernels.distribution.run_family: the same scenarios,
rows, tests and Holm correction at --alpha) on one subject, on the suite's chain for --chain-seed (the
suite's --kernel-seed; default 0) with drafts and coins from seed = simulation index; the subject
"fires" when any test of the family is rejected.  For a correct verifier (token, block) the
firing share estimates the family-wise false-alarm rate (at most alpha by construction); for a defect it
is the family's power against that defect at these sizes.  Each share comes with its exact
Clopper-Pearson 95% interval.  The chain is held fixed (its Monte Carlo nulls are drawn once), so the
figures are the power on that chain; --chain-seed varies it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scipy import stats  # noqa: E402

from specsuite.kernels import distribution  # noqa: E402
from specsuite.kernels.inputs import KernelShape  # noqa: E402
from specsuite.kernels.model_verifiers import model_kernel  # noqa: E402

DEFAULT_SUBJECTS = ("token", "block", "token:accept-bias", "token:residual-from-p", "token:warm-target",
                    "block:block-unscaled-residual", "block:block-stop-at-prefix-weight")


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    interval = stats.binomtest(k, n).proportion_ci(0.95, method="exact")
    return float(interval.low), float(interval.high)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=100)
    parser.add_argument("--rows", type=int, default=distribution.DEFAULT_ROWS)
    parser.add_argument("--alpha", type=float, default=0.001)
    parser.add_argument("--kernel-vocab", type=int, default=512, help="the chain uses 8 ids per position; the width only costs time")
    parser.add_argument("--chain-seed", type=int, default=0)
    parser.add_argument("--subjects", nargs="+", default=list(DEFAULT_SUBJECTS), help="token|block[:DEFECT]")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    shape = KernelShape(batch=256, kernel_vocab=args.kernel_vocab, tokenizer_vocab=args.kernel_vocab)
    report = []
    print(f"family at rows {args.rows}, alpha {args.alpha} (Holm), shapes {shape.to_dict()}, {args.sims} simulations per subject")
    for subject in args.subjects:
        path, _, defect = subject.partition(":")
        kernel = model_kernel(block=path == "block", defect=defect or None)
        started = time.perf_counter()
        fired_runs = 0
        fired_tests: dict[str, int] = {}
        for sim in range(args.sims):
            tests, _ = distribution.run_family(kernel, shape, 10_000 + sim, args.rows, args.alpha, args.chain_seed)
            fired = [t for t in tests if t.rejected]
            fired_runs += bool(fired)
            for test in fired:
                key = f"{test.scenario}/{test.test}"
                fired_tests[key] = fired_tests.get(key, 0) + 1
        low, high = clopper_pearson(fired_runs, args.sims)
        seconds = time.perf_counter() - started
        print(f"{subject:40s} fired {fired_runs:4d}/{args.sims} = {fired_runs / args.sims:.3f} [{low:.3f}, {high:.3f}]  "
              f"tests firing: {dict(sorted(fired_tests.items()))}  ({seconds:.0f} s)", flush=True)
        report.append({"subject": subject, "fired": fired_runs, "sims": args.sims, "share": fired_runs / args.sims,
                       "ci95": [low, high], "tests_firing": fired_tests, "seconds": seconds})
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": args.rows, "alpha": args.alpha, "shape": shape.to_dict(),
                                               "subjects": report}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
