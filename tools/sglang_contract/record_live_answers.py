"""Record what a live SGLang server answers, as shapes, for tests/sglang_contract/test_live_answers.py.

    python tools/sglang_contract/record_live_answers.py http://127.0.0.1:30000 tests/data/sglang_live/eagle-0.5.23.json

The server should be the project's tiny Llama with EAGLE (`specsuite serve-sglang`), idle (a flush is
refused while requests run). The file keeps the answers as they came, less credential-like keys
(specsuite.server.identity.sanitise), with /metrics as its sample names and /flush_cache as its status.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import requests  # noqa: E402

from specsuite.server.answer_shapes import record_answers  # noqa: E402
from specsuite.server.identity import collect_secrets, sanitise  # noqa: E402


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: record_live_answers.py SERVER_URL OUT.json", file=sys.stderr)
        return 2
    url, out = argv
    try:
        answers = record_answers(url)
    except (requests.RequestException, ValueError) as exc:
        print(f"record_live_answers: {url} did not answer as SGLang: {exc}", file=sys.stderr)
        return 2
    recorded = {"server_version": answers["server_info"].get("version"), "answers": sanitise(answers, collect_secrets(answers))}
    Path(out).write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    print(f"record_live_answers: {len(answers)} answers of SGLang {recorded['server_version']} written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
