"""What failed in a `specsuite run`, arm by arm, each with a one-line reason: tests that failed or errored (the
sessions' JUnit, specsuite.orchestration.junit), requests the server failed, requests the harness gave up waiting for,
and benchmark requests that failed.

Why timeouts are apart from the server's failures: a request the harness stopped waiting for says as much about the
test machine (its `--request-timeout`, the load it ran under) as about the server, and the reader must know which
before blaming the build.  The line of a timeout therefore names the timeout and the 1-minute load average the
session ended under (`repeats[].load_average`, recorded by the runner), against the machine's core count.

`specsuite run --profile nightly` exits 1 on any of them (specsuite/cli/run.py); every profile lists them in the
terminal, summary.md and the report (`Document.failures`).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable

from specsuite.families.registry import families
from specsuite.results.types import Arm, Document, FailedTest, RunFailure

# ErrorClass values (specsuite/server/faults.py) that mean the harness stopped waiting, not that the server answered badly.
HARNESS_GAVE_UP = frozenset({"timeout", "connect_timeout"})
SHOWN_TESTS = 3


def run_failures(document: Document, request_timeout_s: float, cores: int | None = None, load_now: bool = False) -> list[RunFailure]:
    """Every arm's failures, in run order (module docstring).  `load_now`: a repeat without a recorded load (a pytest
    session's own document) is read against the load average now."""
    cores = cores or os.cpu_count() or 1
    now = os.getloadavg()[0] if load_now else None
    found: list[RunFailure] = []
    for name in document.ordered_arms():
        arm = document.arms.get(name)
        if arm is not None:
            found += _arm_failures(name, arm, request_timeout_s, cores, now)
    return found


def _arm_failures(name: str, arm: Arm, request_timeout_s: float, cores: int, load_now: float | None = None) -> list[RunFailure]:
    found: list[RunFailure] = []
    tests = [test for repeat in arm.repeats for test in (repeat.tests.failed if repeat.tests is not None else [])]
    if tests:
        found.append(RunFailure(arm=name, kind="tests", count=len(tests), reason=_tests_line(tests)))
    gave_up, server, total, where = _request_errors(arm)
    if server:
        classes = ", ".join(f"{cls} {n}" for cls, n in server.most_common())
        count = sum(server.values())
        found.append(RunFailure(arm=name, kind="server_errors", count=count,
                                reason=f"the server failed {count} of {total} requests ({classes}){_at(where['server'])}"))
    if gave_up:
        count = sum(gave_up.values())
        loads = [r.load_average for r in arm.repeats if r.load_average is not None] or ([load_now] if load_now is not None else [])
        load = f"1-minute load average {max(loads):.1f} on {cores} cores when the session ended" if loads else "load not recorded"
        found.append(RunFailure(arm=name, kind="harness_timeouts", count=count,
                                reason=f"the harness gave up waiting on {count} of {total} requests: no answer within its "
                                       f"--request-timeout of {request_timeout_s:g} s ({load}){_at(where['harness'])}"))
    for family in families():  # a family's own failure lines (the serving benchmark's failed requests)
        if family.failures is not None:
            found += [RunFailure(arm=name, kind=line.kind, count=line.count, reason=line.reason)
                      for line in family.failures([repeat.workloads for repeat in arm.repeats])]
    return found


def _request_errors(arm: Arm) -> tuple[Counter[str], Counter[str], int, dict[str, list[str]]]:
    """(harness timeouts by class, server failures by class, requests sent, where each kind happened) over the arm's
    correctness cases and every family's requests (`WorkloadFamily.request_tallies`: GSM8K's runs)."""
    gave_up: Counter[str] = Counter()
    server: Counter[str] = Counter()
    where: dict[str, list[str]] = {"harness": [], "server": []}
    total = 0
    # A case's n_requests counts the answers it got.
    units = [(case.case_id, case.n_requests + case.n_errors, case.n_errors, case.error_classes) for case in arm.cases()]
    units += [(tally.label, tally.requests, tally.errors, tally.error_classes) for family in families() if family.request_tallies
              for repeat in arm.repeats for tally in family.request_tallies(repeat.workloads)]
    for label, requests, errors, classes in units:
        total += int(requests or 0)
        if not errors:
            continue
        counted = Counter({str(cls): int(n) for cls, n in (classes or {}).items()})
        if sum(counted.values()) < errors:  # errors without a recorded class: the server's, as far as the results say
            counted["unclassified"] += int(errors) - sum(counted.values())
        harness = Counter({cls: n for cls, n in counted.items() if cls in HARNESS_GAVE_UP})
        rest = counted - harness
        gave_up += harness
        server += rest
        if harness:
            where["harness"].append(label)
        if rest:
            where["server"].append(label)
    return gave_up, server, total, where


def _at(labels: Iterable[str]) -> str:
    shown = list(dict.fromkeys(labels))
    return f" at {', '.join(shown[:4])}{', ...' if len(shown) > 4 else ''}" if shown else ""


def _tests_line(tests: list[FailedTest]) -> str:
    failed = sum(test.kind == "failed" for test in tests)
    errored = len(tests) - failed
    counts = " and ".join(part for part in (f"{failed} test(s) failed" if failed else "",
                                            f"{errored} errored" if errored else "") if part)
    shown = "; ".join(f"{test.test}: {test.message or test.kind}" for test in tests[:SHOWN_TESTS])
    return f"{counts}: {shown}" + ("; ..." if len(tests) > SHOWN_TESTS else "")
