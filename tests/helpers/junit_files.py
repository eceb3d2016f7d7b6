"""JUnit XML files as pytest writes them, for the tests of the live-server jobs' judges."""

from __future__ import annotations

from pathlib import Path


def junit_file(tmp_path: Path, cases: dict[str, str], message: str = "x") -> Path:
    """A run of `cases` (test id -> passed | failed | error | skipped) written to tmp_path/run.xml, each
    failure, error and skip with `message` (an XML attribute value, escaped by the caller)."""
    rows = []
    for test_id, state in cases.items():
        path, name = test_id.split("::")
        classname = path.removesuffix(".py").replace("/", ".")
        inner = {"failed": f"<failure message='{message}'/>", "error": f"<error message='{message}'/>",
                 "skipped": f"<skipped message='{message}'/>"}.get(state, "")
        rows.append(f'<testcase classname="{classname}" name="{name}">{inner}</testcase>')
    path = tmp_path / "run.xml"
    path.write_text(f"<testsuites><testsuite>{''.join(rows)}</testsuite></testsuites>")
    return path
