"""Power and false alarms of the lossless tests against one server, run by run (seed by seed).

Each run is what the vLLM job's lossless suite does at temperature 1 (its sizes by default: 120 PIT
generations of 16 tokens, 4 prompts x 100 two-sample draws of k+2 tokens on the server under test,
scored on the reference), with seed first-seed + i, and records per test the p-value:
- `pit`: the omnibus PIT (suites/test_lossless.py::test_pit_calibration);
- `mode_rate`: the top-token rate z (test_mode_not_overdrawn), PIT and two-sample draws pooled;
- `betting`: the acceptance test martingale (test_draft_acceptance_calibrated; vLLM only).
Also the accepted-draft share and the tokens generated. The reference's own two-sample draws (not
needed by these tests) are not made.

    specsuite serve-vllm --method eagle --port 18165 --patch planted_bias --planted-bias-c 1.25
    specsuite serve-vllm --method none --port 18166
    .venv/bin/python tools/calibration/lossless_power.py --server-url http://127.0.0.1:18165 \\
        --reference-url http://127.0.0.1:18166 --runs 10 --label c=1.25 --out /tmp/power-c1.25.json

Without --server-url (and --kind sglang) it launches the reference server's fix arm and its speculation-off
twin, and stops both at the end. Each run's record is appended to --out as it arrives (JSON lines), so a
cut-short measurement keeps what it measured; with --raw the run's positions are kept beside it, so
`--curve` can pool runs (2x, 4x the job's tokens) or cut them (1/2x) for the power curve.
`--summarise FILE...` prints the detection counts per label and test at the alphas.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere

from specsuite.errors import SpecsuiteError  # noqa: E402
from specsuite.families.correctness.prompts import load_prompts  # noqa: E402
from specsuite.families.lossless.directed import DirectedPosition, acceptance_betting_test, top_token_rate_test  # noqa: E402
from specsuite.families.lossless.reference import SPECULATION_OFF_ARGS  # noqa: E402
from specsuite.families.lossless.workload import LosslessConfig, LosslessWorkload, SamplingSetting, draft_steps_of  # noqa: E402
from specsuite.server.identity import ServerIdentity  # noqa: E402
from specsuite.server.kinds.sglang.client import SGLangClient  # noqa: E402
from specsuite.server.kinds.vllm.client import VLLMClient  # noqa: E402
from specsuite.server.launcher import launch_reference_server  # noqa: E402
from specsuite.stats import clopper_pearson  # noqa: E402

TESTS = ("pit", "mode_rate", "betting")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server-url")
    parser.add_argument("--reference-url", help="speculation-off server scoring the two-sample draws (default: the server under test)")
    parser.add_argument("--kind", choices=("vllm", "sglang"), default="vllm")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--lossless-samples", type=int, default=120, help="PIT generations per run (the vLLM job's 120)")
    parser.add_argument("--two-sample-size", type=int, default=100, help="two-sample draws per prompt (the job's 100; 0: none)")
    parser.add_argument("--draft-steps", type=int, default=3, help="k, drafts per step (vLLM serve-vllm's 3)")
    parser.add_argument("--alpha", type=float, default=0.001)
    parser.add_argument("--label", default="")
    parser.add_argument("--out", help="append one JSON line per run here")
    parser.add_argument("--raw", help="keep each run's positions here (FILE.raw.jsonl) for --curve")
    parser.add_argument("--summarise", nargs="+", metavar="FILE", help="only summarise earlier --out files")
    parser.add_argument("--curve", nargs="+", metavar="RAW", help="only print the power curve from earlier --raw files")
    return parser.parse_args(argv)


def client_of(kind: str, url: str) -> SGLangClient:
    return VLLMClient(url, timeout_s=300.0) if kind == "vllm" else SGLangClient(url, timeout_s=300.0)


def one_run(args: argparse.Namespace, seed: int) -> dict[str, Any]:
    setting = SamplingSetting(1.0)
    test = client_of(args.kind, args.server_url)
    reference = client_of(args.kind, args.reference_url or args.server_url)
    config = LosslessConfig(settings=(setting,), pit_requests=args.lossless_samples, two_sample_size=max(1, args.two_sample_size),
                            concurrency=8, alpha=args.alpha, seed=seed)
    draft_steps = args.draft_steps if args.kind == "vllm" else draft_steps_of(
        ServerIdentity.from_server(test.base_url, test.model_info(), test.server_info()))
    workload = LosslessWorkload(test, reference, [p.prompt for p in load_prompts()], config, draft_steps)
    started = time.perf_counter()
    pit = workload.pit(setting)
    if args.two_sample_size > 0:
        workload.two_sample_test_arm(setting)
    sources = workload.directed[setting.key]
    positions = [p for requests in sources.values() for request in requests for p in request]
    rate, bet = top_token_rate_test(positions, args.alpha), acceptance_betting_test(positions, args.alpha)
    drafts = [p for p in positions if p.role in ("accepted", "recovered")]
    if args.raw:
        with open(args.raw, "a") as handle:
            handle.write(json.dumps({"label": args.label, "seed": seed, "pit_p": pit.test.p_value,
                                     "positions": [[p.mode_prob, int(p.is_mode), p.own_prob, p.role] for p in positions]}) + "\n")
    return {
        "label": args.label, "seed": seed, "wall_s": time.perf_counter() - started,
        "tokens": sum(len(request) + 1 for requests in sources.values() for request in requests),
        "positions": len(positions),
        "accepted_share": sum(p.role == "accepted" for p in drafts) / len(drafts) if drafts else None,
        "p": {"pit": pit.p_value, "mode_rate": rate.p_value, "betting": bet.p_value},
        "mode_rate_excess": rate.excess_rate, "betting_mean_ratio": bet.mean_weighted_acceptance,
    }


def summarise(paths: list[str], alphas: tuple[float, ...] = (0.001, 0.01)) -> list[str]:
    runs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for path in paths:
        for line in Path(path).read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                runs[record["label"]].append(record)
    lines = ["| label | runs | tokens per run | accepted share | " + " | ".join(f"{t} fired (alpha {a:g}) [CP95]" for t in TESTS for a in alphas) + " |",
             "|---|---|---|---|" + "---|" * (len(TESTS) * len(alphas))]
    for label, records in runs.items():
        n = len(records)
        shares = [r["accepted_share"] for r in records if r["accepted_share"] is not None]
        cells = []
        for test in TESTS:
            for alpha in alphas:
                fired = sum(r["p"][test] < alpha for r in records)
                low, high = clopper_pearson(fired, n)
                cells.append(f"{fired}/{n} [{low:.2f}, {high:.2f}]")
        share = f"{sum(shares) / len(shares):.3f}" if shares else "-"
        lines.append(f"| {label} | {n} | {sum(r['tokens'] for r in records) / n:.0f} | {share} | " + " | ".join(cells) + " |")
    return lines


def curve(paths: list[str], scales: tuple[float, ...] = (0.125, 0.25, 0.5, 1, 2, 4), alphas: tuple[float, ...] = (0.001, 0.01)) -> list[str]:
    """Detections of the two directed tests at a fraction or multiple of one run's positions: runs cut
    in half (first half of the positions) or pooled in disjoint groups of 2 or 4 runs."""
    runs: dict[str, list[list[DirectedPosition]]] = defaultdict(list)
    for path in paths:
        for line in Path(path).read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                runs[record["label"]].append([DirectedPosition(m, bool(i), o, r) for m, i, o, r in record["positions"]])
    lines = ["| label | budget (x the job's) | samples | positions per sample | " +
             " | ".join(f"{t} fired (alpha {a:g})" for t in ("mode_rate", "betting") for a in alphas) + " |",
             "|---|---|---|---|" + "---|" * (2 * len(alphas))]
    for label, groups in runs.items():
        for scale in scales:
            if scale < 1:
                samples = [run[: int(len(run) * scale)] for run in groups]
            else:
                size = int(scale)
                samples = [[p for run in groups[i : i + size] for p in run] for i in range(0, len(groups) - size + 1, size)]
            if not samples:
                continue
            cells = []
            for test in (top_token_rate_test, acceptance_betting_test):
                p_values = [test(sample, 0.001).p_value for sample in samples]
                cells += [f"{sum(p < a for p in p_values)}/{len(samples)}" for a in alphas]
            lines.append(f"| {label} | {scale:g} | {len(samples)} | {sum(map(len, samples)) / len(samples):.0f} | " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    launched = []
    try:
        if args.summarise or args.curve:
            print("\n".join(summarise(args.summarise) if args.summarise else curve(args.curve)))
            return 0
        if not args.server_url:
            if args.kind != "sglang":
                raise SpecsuiteError("--server-url is needed with --kind vllm (or --summarise/--curve FILE...)")
            log_dir = Path(tempfile.mkdtemp(prefix="lossless-power-"))
            launched.append(launch_reference_server("fix", log_dir=log_dir))
            launched.append(launch_reference_server("fix", log_dir=log_dir, extra_args=SPECULATION_OFF_ARGS))
            args.server_url, args.reference_url = launched[0].base_url, launched[1].base_url
        for index in range(args.runs):
            record = one_run(args, args.first_seed + index)
            print(json.dumps(record), flush=True)
            if args.out:
                with open(args.out, "a") as handle:
                    handle.write(json.dumps(record) + "\n")
    except (SpecsuiteError, OSError, json.JSONDecodeError) as exc:
        print(f"lossless_power: {exc}", file=sys.stderr)
        return 1
    finally:
        for server in launched:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
