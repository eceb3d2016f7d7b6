"""Null A/B: fix against fix under 20 different seeds must give no "worse" verdict (the A/B's false-alarm check).

Starts two reference servers on the fix arm, then for each seed runs `specsuite run
--server-url A --baseline-url B --seed S` with a small grid, and counts "worse" verdicts over
every metric.  Prints one line per seed and a total; exits 1 if any verdict is "worse".

    .venv/bin/python tools/calibration/null_ab.py --seeds 20 --out /tmp/null-ab
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from specsuite.results.store import load_results  # noqa: E402
from specsuite.server.launcher import launch_reference_server  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--out", default=None, help="results folder (default: a temporary one)")
    args = parser.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="null-ab-"))
    servers = [launch_reference_server("fix", log_dir=out / name, ready_timeout_s=120) for name in ("a", "b")]
    worse_total, rows = 0, 0
    try:
        for seed in range(args.seeds):
            command = [sys.executable, "-m", "specsuite.cli.main", "run", "--server-url", servers[0].base_url, "--baseline-url", servers[1].base_url,
                       "--seed", str(seed), "--temperatures", "0,1.0", "--top-p", "0.95", "--results-dir", str(out), "--run-id", f"seed-{seed}",
                       "--no-report"]
            subprocess.run(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, timeout=600)
            analysis = load_results(out / f"seed-{seed}").analysis
            comparisons = analysis.comparisons if analysis is not None else []
            worse = [f"{c.metric}@{c.case_id}" for c in comparisons if c.verdict == "worse"]
            verdicts = sorted({str(c.verdict) for c in comparisons})
            worse_total += len(worse)
            rows += len(comparisons)
            print(f"seed {seed:2d}: {len(comparisons)} comparisons, verdicts {verdicts}, worse: {worse or 'none'}", flush=True)
    finally:
        for server in servers:
            server.stop()
    print(f"null A/B over {args.seeds} seeds: {worse_total} 'worse' verdicts in {rows} comparisons")
    return 1 if worse_total else 0


if __name__ == "__main__":
    sys.exit(main())
