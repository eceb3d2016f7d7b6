"""Render every recorded run in tests/data with `specsuite report` and print one SHA-256 per written file.

    PYTHONPATH=$PWD python tools/render_recorded_runs.py OUT_DIR [--root CHECKOUT] > hashes.txt

A refactor that must not change what users read renders the same runs before and after and compares the two
hash lists (`diff before.txt after.txt`): report.md, report.html, results.csv and every figure, byte for byte.
Each run renders in a child process of the checkout's own code (`--root`, default this one), so an old
checkout can be rendered with this script too.  Gzipped runs are unpacked into OUT_DIR first.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import os
import subprocess
import sys
from pathlib import Path

# The recorded results files (other files in tests/data are wire recordings and answer sets, not runs).
RECORDED_RUNS = (
    "tests/data/results_v1/pytest_session.json",
    "tests/data/results/v2_pytest_session.json",
    "tests/data/results/v2_main_job.json",
    "tests/data/ab_results/main_job_two_repeats.json.gz",
    "tests/data/ab_results/nofix_vs_fix_smoke.json",
    "tests/data/ab_results/main_job_smoke.json.gz",
)
RENDER_TIMEOUT_S = 300


def render(root: Path, run: str, out_dir: Path) -> Path:
    """Render one recorded run into OUT_DIR/<run with / as _>; a failed render is one line and exit 1."""
    name = run.replace("/", "_")
    source = root / run
    if source.suffix == ".gz":
        unpacked = out_dir / f"{name}.json"
        unpacked.write_bytes(gzip.decompress(source.read_bytes()))
        source = unpacked
    target = out_dir / name
    env = {**os.environ, "PYTHONPATH": str(root), "MPLBACKEND": "Agg"}
    done = subprocess.run([sys.executable, "-m", "specsuite.cli.main", "report", str(source), "--out", str(target)],
                          cwd=root, env=env, capture_output=True, text=True, timeout=RENDER_TIMEOUT_S)
    if done.returncode != 0:
        sys.exit(f"render_recorded_runs: {run} did not render: {(done.stderr or done.stdout).strip().splitlines()[-1:]}")
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1], help="the checkout whose code renders")
    args = parser.parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for run in RECORDED_RUNS:
        target = render(args.root.resolve(), run, args.out_dir)
        for path in sorted(p for p in target.rglob("*") if p.is_file()):
            print(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.relative_to(args.out_dir)}")


if __name__ == "__main__":
    main()
