"""Judge a live-server job's pytest run (JUnit XML) against its documented findings.

The suites keep flagging real server bugs (that is their job), so a job against a real server
cannot simply require "all passed". It passes only when:
- tests ran, and none errored;
- every failing test matches a `may_fail` pattern of a documented finding (anything else is either a
  harness defect or a new finding: both need a person);
- every finding still fires at least one of its `must_fire_one_of` tests (a fixed server, or a suite
  that stopped catching the bug, must be noticed).

    python .ci/outcomes_judge.py JOB RESULTS.xml KNOWN.json     (JOB names the job in its messages)
"""

from __future__ import annotations

import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def outcomes(xml_path: Path) -> dict[str, str]:
    """test id -> passed | failed | error | skipped."""
    found = {}
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        path = case.get("classname", "").replace(".", "/")
        test_id = f"{path}.py::{case.get('name')}"
        state = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                state = {"failure": "failed"}.get(child.tag, child.tag)
        found[test_id] = state
    return found


def failure_reasons(xml_path: Path, limit: int = 300) -> dict[str, str]:
    """test id -> the first line of its failure or error message, cut to `limit` characters: the reason an
    unexplained failure shows in the job's verdict lines, where a reader of the CI log's tail finds it."""
    reasons = {}
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        for child in case:
            if child.tag in ("failure", "error"):
                lines = (child.get("message") or child.text or "").strip().splitlines()
                test_id = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
                reasons[test_id] = (lines[0] if lines else "")[:limit]
    return reasons


def judge(results: dict[str, str], known: dict, reasons: dict[str, str] | None = None) -> list[str]:
    """The problems; empty when the run is as the findings say. `reasons` (failure_reasons) adds each
    unexplained failure's message to its line."""
    reasons = reasons or {}
    problems = []
    ran = [test for test, state in results.items() if state in ("passed", "failed")]
    if not ran:
        problems.append("no test ran")
    problems += [f"error: {test}" + (f" ({reasons[test]})" if reasons.get(test) else "")
                 for test, state in results.items() if state == "error"]
    failed = [test for test, state in results.items() if state == "failed"]
    for test in failed:
        if not any(re.fullmatch(pattern, test) for finding in known["findings"] for pattern in finding["may_fail"]):
            reason = f" ({reasons[test]})" if reasons.get(test) else ""
            problems.append(f"unexplained failure (a harness defect or a new finding): {test}{reason}")
    for finding in known["findings"]:
        if not any(re.fullmatch(pattern, test) for test in failed for pattern in finding["must_fire_one_of"]):
            problems.append(f"{finding['finding']} no longer fires (none of {finding['must_fire_one_of']} failed): fixed upstream, or the suite went blind")
    return problems


def main(argv: list[str], job: str | None = None, default_known: Path | None = None) -> int:
    """`argv` is [JOB] RESULTS.xml [KNOWN.json]; a wrapper may fix the job name and the default findings file."""
    if job is None:
        if not argv:
            print("usage: outcomes_judge.py JOB RESULTS.xml KNOWN.json", file=sys.stderr)
            return 2
        job, argv = argv[0], argv[1:]
    if not 1 <= len(argv) <= 2 or (len(argv) == 1 and default_known is None):
        print(f"usage: {job} judge: RESULTS.xml KNOWN.json", file=sys.stderr)
        return 2
    try:
        results, reasons = outcomes(Path(argv[0])), failure_reasons(Path(argv[0]))
        known = json.loads(Path(argv[1] if len(argv) > 1 else default_known).read_text())
    except (OSError, ET.ParseError, json.JSONDecodeError) as exc:
        print(f"{job} job: cannot read the run or the findings: {exc}", file=sys.stderr)
        return 2
    counts = {state: sum(1 for s in results.values() if s == state) for state in ("passed", "failed", "skipped", "error")}
    print(f"{job} job: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped, {counts['error']} errors")
    for test in (t for t, s in results.items() if s == "failed"):
        print(f"{job} job: failed: {test}")
    problems = judge(results, known, reasons)
    for problem in problems:
        print(f"{job} job: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
