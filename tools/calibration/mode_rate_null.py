"""False alarms of the two-sided mode-rate test (specsuite/families/lossless/directed.py) on a correct server's
own mode probabilities, by seeded simulation.

Reads the positions `lossless_power.py --raw` kept for one label (each position's target mode probability pi_t),
draws "the mode was sampled" as Bernoulli(pi_t) at every position, as an exact sampler does, and applies the
suite's `top_token_rate_test` to each replicate: the share of replicates that fire is the false-alarm rate at the
run's size and that server's pi profile.  Every replicate goes through the suite's function (no re-implementation).

    .venv/bin/python tools/calibration/mode_rate_null.py /tmp/power.raw.jsonl --label refserver-fix --reps 2000
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere

from specsuite.families.lossless.directed import DirectedPosition, top_token_rate_test  # noqa: E402
from specsuite.stats import clopper_pearson  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("raw", help="a lossless_power.py --raw file")
    parser.add_argument("--label", required=True)
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--alphas", type=float, nargs="+", default=[0.001, 0.01])
    args = parser.parse_args(argv)
    runs = [json.loads(line) for line in Path(args.raw).read_text().splitlines() if line.strip()]
    runs = [run for run in runs if run["label"] == args.label]
    if not runs:
        raise SystemExit(f"mode_rate_null: no run labelled {args.label!r} in {args.raw}")
    modes = np.array([position[0] for position in runs[0]["positions"]], dtype=float)  # one run's pi_t profile
    template = [DirectedPosition(mode_prob=float(pi), is_mode=False, own_prob=float(pi), role=None) for pi in modes]
    rng = np.random.default_rng(args.seed)
    p_values = []
    for _ in range(args.reps):
        drawn = rng.random(modes.size) < modes
        positions = [DirectedPosition(mode_prob=t.mode_prob, is_mode=bool(hit), own_prob=t.own_prob, role=t.role)
                     for t, hit in zip(template, drawn, strict=True)]
        p_values.append(top_token_rate_test(positions, 0.001).p_value)
    print(f"{args.label}: {modes.size} positions per replicate, {args.reps} replicates, seed {args.seed}")
    for alpha in args.alphas:
        fired = sum(p < alpha for p in p_values)
        low, high = clopper_pearson(fired, args.reps)
        print(f"  alpha {alpha:g}: {fired}/{args.reps} fired = {fired / args.reps:.4f} [CP95 {low:.4f}, {high:.4f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
