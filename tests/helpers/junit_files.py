"""JUnit XML files as pytest writes them, for the tests of the live-server jobs' judges."""

from __future__ import annotations

from pathlib import Path


def junit_file(tmp_path: Path, cases: dict[str, str]) -> Path:
    """A run of `cases` (test id -> passed | failed | error | skipped) written to tmp_path/run.xml."""
    rows = []
    for test_id, state in cases.items():
        path, name = test_id.split("::")
        classname = path.removesuffix(".py").replace("/", ".")
        inner = {"failed": "<failure message='x'/>", "error": "<error message='x'/>", "skipped": "<skipped message='x'/>"}.get(state, "")
        rows.append(f'<testcase classname="{classname}" name="{name}">{inner}</testcase>')
    path = tmp_path / "run.xml"
    path.write_text(f"<testsuites><testsuite>{''.join(rows)}</testsuite></testsuites>")
    return path
