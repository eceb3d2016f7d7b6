"""JUnit XML files as pytest writes them, for the tests of the live-server jobs' judges."""

from __future__ import annotations

from pathlib import Path
from xml.sax.saxutils import quoteattr


def junit_file(tmp_path: Path, cases: dict[str, str], message: str = "x", messages: dict[str, str] | None = None) -> Path:
    """A run of `cases` (test id -> passed | failed | error | skipped) written to tmp_path/run.xml, each
    failure, error and skip with `message` (an XML attribute value, escaped by the caller), or its own entry of
    `messages` (plain text, newlines kept, escaped here as pytest's writer does)."""
    rows = []
    for test_id, state in cases.items():
        path, name = test_id.split("::")
        classname = path.removesuffix(".py").replace("/", ".")
        text = quoteattr((messages or {})[test_id], {"\n": "&#10;"}) if test_id in (messages or {}) else f"'{message}'"
        inner = {"failed": f"<failure message={text}/>", "error": f"<error message={text}/>",
                 "skipped": f"<skipped message={text}/>"}.get(state, "")
        rows.append(f'<testcase classname="{classname}" name="{name}">{inner}</testcase>')
    path = tmp_path / "run.xml"
    path.write_text(f"<testsuites><testsuite>{''.join(rows)}</testsuite></testsuites>")
    return path
