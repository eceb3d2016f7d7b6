"""Power and false alarms of the kernel suite's verification-rule check (specsuite/kernels/rule_check.py,
suites/test_kernel.py::test_outcome_follows_the_verification_rule) on SGLang's kernel, over seeds.

    python tools/calibration/kernel_rule_power.py --factors 1.25 1.1 --seeds 10 --null-seeds 20
    python tools/calibration/kernel_rule_power.py --factors 1.25 --seeds 10 --null-seeds 0 --json out.json
    python tools/calibration/kernel_rule_power.py --factors 1.25 --token --seeds 10 --null-seeds 10

Subjects: release --version's sampler (default 0.5.23) with block verification (or, with --token, token
verification) as released (the null), and copies of its file with that acceptance scaled by each factor
(specsuite/kernels/mutants.py: block, stop when coin < factor * h_i; token, accept when coin * q < factor * p).
Each seed is a suite run's --kernel-seed: the rule input is built exactly as the suite builds it, at the
suite's default shapes unless --kernel-vocab / --batch say otherwise, and checked the same way.  A subject is
"caught" in a seed when the check fails.  One line per seed and subject (rows with a wrong accepted count or
final token, rounding ties, seconds), then per subject the share caught with its exact 95% interval.
--jsonl appends each seed's record as it finishes, so a long run can be split (--first-seed).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scipy import stats  # noqa: E402

from specsuite.errors import SpecsuiteError  # noqa: E402
from specsuite.kernels import rule_check  # noqa: E402
from specsuite.kernels.inputs import KernelShape  # noqa: E402
from specsuite.kernels.loader import load_kernel  # noqa: E402
from specsuite.kernels.mutants import acceptance_mutant  # noqa: E402


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    interval = stats.binomtest(k, n).proportion_ci(0.95, method="exact")
    return float(interval.low), float(interval.high)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="0.5.23")
    parser.add_argument("--factors", type=float, nargs="*", default=[1.25, 1.1])
    parser.add_argument("--token", action="store_true", help="token verification instead of block verification")
    parser.add_argument("--seeds", type=int, default=10, help="seeds per mutant")
    parser.add_argument("--null-seeds", type=int, default=20, help="seeds on the release as released")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--rows", type=int, default=rule_check.RULE_ROWS)
    parser.add_argument("--kernel-vocab", type=int, default=KernelShape().kernel_vocab)
    parser.add_argument("--batch", type=int, default=KernelShape().batch)
    parser.add_argument("--work-dir", default=None, help="where the mutated copies are written (default: a temporary folder)")
    parser.add_argument("--json", default=None)
    parser.add_argument("--jsonl", default=None)
    args = parser.parse_args(argv)
    block = not args.token
    suffix = ":block" if block else ""
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="specsuite-rule-power-"))
    shape = KernelShape(batch=args.batch, kernel_vocab=args.kernel_vocab, tokenizer_vocab=args.kernel_vocab)
    try:
        subjects = [("released", load_kernel(f"sglang=={args.version}{suffix}"), args.null_seeds)]
        for factor in args.factors:
            path = acceptance_mutant(factor, work, block, args.version)
            subjects.append((f"x{factor:g}", load_kernel(f"{path}{suffix}"), args.seeds))
    except SpecsuiteError as exc:
        print(f"kernel_rule_power: error: {exc}", file=sys.stderr)
        return 2
    print(f"sglang=={args.version} {'block' if block else 'token'} verification on {subjects[0][1].device}; shapes {shape.to_dict()}; "
          f"{args.rows} rule rows per seed; mutants in {work}", flush=True)
    summary = []
    for label, kernel, seeds in subjects:
        caught = 0
        records = []
        for seed in range(args.first_seed, args.first_seed + seeds):
            started = time.perf_counter()
            check = rule_check.rule_check_for(kernel, shape, seed, args.rows)
            seconds = time.perf_counter() - started
            caught += not check.passed
            record = {"subject": label, "seed": seed, "caught": not check.passed, "seconds": seconds, **check.to_dict()}
            records.append(record)
            print(f"{label:9s} seed {seed:3d}: {'CAUGHT' if not check.passed else 'passed'}; wrong accepted count {check.wrong_length} "
                  f"({check.longer} longer), wrong final {check.wrong_final}, ties {check.length_ties}+{check.final_ties}; mean accepted "
                  f"{check.observed_mean:.3f} vs rule {check.expected_mean:.3f}; {seconds:.1f} s", flush=True)
            if args.jsonl:
                with open(args.jsonl, "a") as out:
                    out.write(json.dumps(record) + "\n")
        if seeds:
            low, high = clopper_pearson(caught, seeds)
            print(f"{label:9s} caught {caught}/{seeds} [{low:.3f}, {high:.3f}]", flush=True)
            summary.append({"subject": label, "caught": caught, "seeds": seeds, "ci95": [low, high], "records": records})
    if args.json:
        Path(args.json).write_text(json.dumps({"version": args.version, "verification": "block" if block else "token",
                                               "shape": shape.to_dict(), "rows": args.rows, "subjects": summary}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
