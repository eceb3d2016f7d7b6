"""Judge the vLLM job's pytest run (JUnit XML) against docs/findings/vllm_known_failures.json.

The suites keep flagging a real vLLM bug (that is their job), so the job cannot simply require
"all passed". It passes only when:
- tests ran, and none errored;
- every failing test matches a `may_fail` entry of a documented finding, by its test id and by its message
  (`reason_pattern`; anything else is either a harness defect or a new finding: both need a person);
- every `must_fire` test still fails for its finding's reason, each one that stopped named (a fixed vLLM, in part
  or whole, or a suite that stopped catching the bug, must be noticed).

    python .ci/vllm_outcomes.py RESULTS.xml [KNOWN.json]

The corrected run (vLLM with the project's expand fix, specsuite/fixtures/vllm_patches/expand_fix) has no known-failure
list: it passes only when tests ran, none failed or errored, and the server's log shows the patch active
(without the line the run is not called corrected, whatever its results):

    python .ci/vllm_outcomes.py --corrected SERVER.log RESULTS.xml
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

# The known-failure judge is shared with the SGLang job (.ci/outcomes_judge.py, beside this file).
sys.path.insert(0, str(Path(__file__).resolve().parent))
from outcomes_judge import explained_by, failure_messages, failure_reasons, judge, outcomes  # noqa: E402
from outcomes_judge import main as judge_main  # noqa: E402

DEFAULT_KNOWN = Path(__file__).resolve().parents[1] / "docs" / "findings" / "vllm_known_failures.json"
__all__ = ["DEFAULT_KNOWN", "explained_by", "failure_messages", "judge", "judge_corrected", "main", "main_corrected", "outcomes"]


def judge_corrected(results: dict[str, str], patch_problem: str | None, reasons: dict[str, str] | None = None) -> list[str]:
    """The problems of the corrected run: no known failures here, and the patch must show in the log.
    `reasons` (failure_reasons) adds each failure's message to its line."""
    problems = [] if patch_problem is None else [f"not a corrected run: {patch_problem}"]
    if not any(state in ("passed", "failed") for state in results.values()):
        problems.append("no test ran")
    reasons = reasons or {}
    problems += [f"{state}: {test}" + (f" ({reasons[test]})" if reasons.get(test) else "")
                 for test, state in results.items() if state in ("failed", "error")]
    return problems


def main_corrected(log_path: Path, xml_path: Path) -> int:
    from specsuite.errors import SpecsuiteError
    from specsuite.server.kinds.vllm.patches import require_patch_active

    try:
        results, reasons = outcomes(xml_path), failure_reasons(xml_path)
    except (OSError, ET.ParseError) as exc:
        print(f"vllm job (corrected): cannot read the run: {exc}", file=sys.stderr)
        return 2
    try:
        print(f"vllm job (corrected): {require_patch_active(log_path, 'expand_fix')}")
        patch_problem = None
    except SpecsuiteError as exc:
        patch_problem = str(exc)
    counts = {state: sum(1 for s in results.values() if s == state) for state in ("passed", "failed", "skipped", "error")}
    print(f"vllm job (corrected): {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped, "
          f"{counts['error']} errors (no known-failure list)")
    problems = judge_corrected(results, patch_problem, reasons)
    for problem in problems:
        print(f"vllm job (corrected): {problem}", file=sys.stderr)
    return 1 if problems else 0


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "--corrected":
        return main_corrected(Path(argv[1]), Path(argv[2]))
    if not 1 <= len(argv) <= 2 or argv[0].startswith("-"):
        print("usage: vllm_outcomes.py RESULTS.xml [KNOWN.json] | --corrected SERVER.log RESULTS.xml", file=sys.stderr)
        return 2
    return judge_main(argv, job="vllm", default_known=DEFAULT_KNOWN)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
