"""Each `specsuite run` session's JUnit XML (pytest's `--junitxml`), read back into the session's entry.

The merge keeps, per session, how many tests passed and skipped and every test that failed or errored with its
one-line message (`tests` in the repeat's entry).  Two readers need it: the absolute gate of `--profile nightly`
(specsuite.analysis.absolute: a failed lossless test, GSM8K below its floor, ...) and the report's "errored: REASON"
for a family that could not run (a missing optional dependency, a benchmark that raised), which otherwise left
nothing in results.json but its absence.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from specsuite.results.types import FailedTest, JunitOutcome

MAX_FAILURES = 200  # a broken server fails every case; the first ones say what the rest do
MAX_MESSAGE = 400
# pytest's wrapping of an error outside the test body, e.g. 'failed on setup with "specsuite.errors.SpecsuiteError: ..."'.
_SETUP = re.compile(r'^failed on (?:setup|teardown) with "(.*)"$', re.DOTALL)
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?(?:[A-Z]\w*(?:Error|Exception)|Failed): ")


def junit_path(sessions_dir: Path, run_id: str) -> Path:
    """Where a session writes its JUnit XML: beside its log, `<sessions>/<run_id>.junit.xml`."""
    return sessions_dir / f"{run_id}.junit.xml"


def one_line(message: str) -> str:
    """A failure message as one line: pytest's wrapping, the exception's class and `specsuite: ` removed, first line only."""
    text = message.strip()
    match = _SETUP.match(text)
    if match:
        text = match.group(1)
    text = _EXCEPTION.sub("", text.splitlines()[0] if text else "")
    text = text.removeprefix("specsuite: ").strip()
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE - 1] + "…"


def read_junit(path: Path) -> JunitOutcome | None:
    """How many tests passed and skipped, and each that failed or errored (`{"passed", "skipped", "failed": [{"test",
    "module", "function", "kind", "message"}]}` when written); None without a file (a session that stopped before pytest
    wrote it) or with one that is not JUnit XML."""
    try:
        root = ElementTree.parse(path).getroot()
    except (OSError, ElementTree.ParseError):
        return None
    passed = skipped = 0
    failed: list[FailedTest] = []
    for case in root.iter("testcase"):
        problem = next((child for child in case if child.tag in ("failure", "error")), None)
        if problem is None:
            if any(child.tag == "skipped" for child in case):
                skipped += 1
            else:
                passed += 1
            continue
        # The XML's attributes, read by name: pytest's JUnit format is the wire here.
        module = (case.get("classname") or "").rsplit(".", 1)[-1]
        name = case.get("name") or ""
        if len(failed) < MAX_FAILURES:
            failed.append(FailedTest.written(test=f"{module}::{name}", module=module, function=name.split("[", 1)[0],
                                             kind="failed" if problem.tag == "failure" else "error",
                                             message=one_line(problem.get("message") or problem.text or "")))
    return JunitOutcome.written(passed=passed, skipped=skipped, failed=failed)


def combine(outcomes: list[JunitOutcome | None]) -> JunitOutcome | None:
    """Several parts' outcomes as one session's."""
    present = [o for o in outcomes if o is not None]
    if not present:
        return None
    return JunitOutcome.written(passed=sum(o.passed for o in present), skipped=sum(o.skipped for o in present),
                                failed=[f for o in present for f in o.failed][:MAX_FAILURES])
