"""Judge a live-server job's pytest run (JUnit XML) against its documented findings.

The suites keep flagging real server bugs (that is their job), so a job against a real server
cannot simply require "all passed". It passes only when:
- tests ran, and none errored;
- every failure is explained: its test id matches a `may_fail` entry's `test` pattern (re.fullmatch) AND its
  message matches that entry's `reason_pattern` (re.match from the start of the message, as pytest writes it in
  the JUnit `message` attribute: the exception's type and text, e.g. "AssertionError: not calibrated to the
  target: ..."). A listed test that fails for another reason (a KeyError in the harness, a refused request) is
  unexplained, with its message: both a harness defect and a new finding need a person;
- every test of the run that a `must_fire` pattern matches still fails for its finding's reason: each one that no
  longer does is named (a partial fix upstream, or a suite that went blind there, must be noticed), and a finding
  none of whose tests fires is said to be fixed or blind. A pattern that matches no test of the run (a job that
  runs some markers only) is not judged there.

    python .ci/outcomes_judge.py JOB RESULTS.xml KNOWN.json     (JOB names the job in its messages)
"""

from __future__ import annotations

import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

REASON_SHOWN = 300  # characters of an unexplained failure's first message line in its verdict line


def _test_id(case: ET.Element) -> str:
    return f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"


def outcomes(xml_path: Path) -> dict[str, str]:
    """test id -> passed | failed | error | skipped."""
    found = {}
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        state = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                state = {"failure": "failed"}.get(child.tag, child.tag)
        found[_test_id(case)] = state
    return found


SHORTENED = "; full report in element text]"  # pytest's note on a message attribute it cut (_pytest/junitxml.py shorten_message)


def failure_messages(xml_path: Path) -> dict[str, str]:
    """test id -> its failure's or error's message: what the reason patterns are matched against. That is the message
    attribute (the exception's type and text), unless pytest cut it (it keeps whole lines up to 500 characters): then
    the exception's own lines of the element text, those pytest marks with "E" (never the traceback's source lines,
    which quote the test's assertion messages whatever went wrong)."""
    messages = {}
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        for child in case:
            if child.tag not in ("failure", "error"):
                continue
            message = child.get("message")
            if message is None or message.endswith(SHORTENED):
                raised = [line[1:].strip() for line in (child.text or "").splitlines() if line.startswith("E ") or line == "E"]
                message = "\n".join(raised) if raised else (message or child.text or "")
            messages[_test_id(case)] = message.strip()
    return messages


def failure_reasons(xml_path: Path, limit: int = REASON_SHOWN) -> dict[str, str]:
    """test id -> the first line of its failure or error message, cut to `limit` characters: the reason an
    unexplained failure shows in the job's verdict lines, where a reader of the CI log's tail finds it."""
    return {test: first_line(message, limit) for test, message in failure_messages(xml_path).items()}


def first_line(message: str, limit: int = REASON_SHOWN) -> str:
    lines = message.strip().splitlines()
    return (lines[0] if lines else "")[:limit]


def check_known(known: dict) -> None:
    """Refuse a findings file whose entries do not say why their tests may fail: a ValueError in one line."""
    for finding in known.get("findings", []):
        name = finding.get("finding", "?")
        for entry in finding.get("may_fail", []):
            if not (isinstance(entry, dict) and isinstance(entry.get("test"), str) and isinstance(entry.get("reason_pattern"), str)):
                raise ValueError(f"{name}: may_fail entry {entry!r} needs a test pattern and a reason_pattern")
            re.compile(entry["test"])
            re.compile(entry["reason_pattern"])
        if "must_fire_one_of" in finding or not finding.get("must_fire"):
            raise ValueError(f"{name}: list the tests that must keep firing under must_fire (each one is checked)")


def explained_by(test: str, message: str, finding: dict) -> bool:
    """Whether this finding explains this failure: a may_fail entry names the test and its reason matches the message."""
    return any(re.fullmatch(entry["test"], test) and re.match(entry["reason_pattern"], message) for entry in finding["may_fail"])


def judge(results: dict[str, str], known: dict, messages: dict[str, str] | None = None) -> list[str]:
    """The problems; empty when the run is as the findings say. `messages` (failure_messages): each failure's
    message, matched against the reason patterns (a failure without one is unexplained)."""
    check_known(known)
    messages = messages or {}
    problems = []
    ran = [test for test, state in results.items() if state in ("passed", "failed")]
    if not ran:
        problems.append("no test ran")
    problems += [f"error: {test}" + _shown(messages.get(test, "")) for test, state in results.items() if state == "error"]
    failed = [test for test, state in results.items() if state == "failed"]
    for test in failed:
        message = messages.get(test, "")
        if any(explained_by(test, message, finding) for finding in known["findings"]):
            continue
        listed = [finding["finding"] for finding in known["findings"] if any(re.fullmatch(e["test"], test) for e in finding["may_fail"])]
        why = (f"its message does not match the reason of {', '.join(listed)}: a harness defect or a new finding" if listed
               else "a harness defect or a new finding")
        problems.append(f"unexplained failure ({why}): {test}{_shown(message)}")
    for finding in known["findings"]:
        problems += _silent(finding, results, messages)
    return problems


def _shown(message: str) -> str:
    line = first_line(message)
    return f" ({line})" if line else ""


def _silent(finding: dict, results: dict[str, str], messages: dict[str, str]) -> list[str]:
    """One line per must_fire test of this run that no longer fails for this finding's reason, and one for the finding
    when none does. A pattern no test of this run matches is not judged here (a job may run some markers only: the
    SGLang job's 0.5.20 run has no lossless suite)."""
    name, lines, fired = finding["finding"], [], 0
    for pattern in finding["must_fire"]:
        for test in [test for test, state in results.items() if state in ("passed", "failed", "skipped") and re.fullmatch(pattern, test)]:
            if results[test] == "failed" and explained_by(test, messages.get(test, ""), finding):
                fired += 1
                continue
            how = {"failed": "fails for another reason"}.get(results[test], results[test])
            lines.append(f"{name}: {test} no longer fires ({how}): fixed upstream there (in part or whole), or the suite went blind there")
    if not fired:
        lines.append(f"{name} no longer fires (none of its must_fire tests {finding['must_fire']} failed for its reason): "
                     f"fixed upstream, or the suite went blind")
    return lines


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
        results, messages = outcomes(Path(argv[0])), failure_messages(Path(argv[0]))
        known = json.loads(Path(argv[1] if len(argv) > 1 else default_known).read_text())
        check_known(known)
    except (OSError, ET.ParseError, json.JSONDecodeError, ValueError, re.error) as exc:
        print(f"{job} job: cannot read the run or the findings: {exc}", file=sys.stderr)
        return 2
    counts = {state: sum(1 for s in results.values() if s == state) for state in ("passed", "failed", "skipped", "error")}
    print(f"{job} job: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped, {counts['error']} errors")
    for test in (t for t, s in results.items() if s == "failed"):
        print(f"{job} job: failed: {test}")
    problems = judge(results, known, messages)
    for problem in problems:
        print(f"{job} job: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
