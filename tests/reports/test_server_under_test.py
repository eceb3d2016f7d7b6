"""The embedded reference server never stands in for a real one unnoticed.

Without --server-url/--launch the suites fall back to the embedded reference server (the README's
commands rely on it). Every output then says so: the pytest header, the terminal summary,
results.json's `server_under_test`, the report's first line. `--require-server-url` and
`--profile nightly` refuse the fallback in one line (pytest exit 4), and so do the CLI's
commands (`specsuite run|gsm8k|bench --require-server-url`, `specsuite run --profile nightly`:
specsuite's error exit 2).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from specsuite.cli import main as cli
from specsuite.reports.render import render_report
from specsuite.reports.server_under_test import server_under_test_line
from specsuite.results.types import Document
from specsuite.server.launcher import launch_reference_server

pytest_plugins = ("pytester",)

REPO = Path(__file__).resolve().parents[2]
SUITES = str(REPO / "suites")
ONE_CHECK = ["-p", "no:cacheprovider", "-m", "correctness", "-k", "invalid_token_ids", "--temperatures", "0", "--top-p", "1.0"]
REFUSAL = "refuses the embedded reference server"


@pytest.fixture(autouse=True)
def no_server_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A nightly job's variable set on this machine would hide the fallback under test."""
    monkeypatch.delenv("SPECSUITE_SERVER_URL", raising=False)


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    pytester.chdir()
    return pytester.runpytest_subprocess(*args, "--results-dir", str(pytester.path / "results"), timeout=300)


def test_the_embedded_default_says_so_in_header_summary_and_results(pytester) -> None:
    junit = pytester.path / "junit.xml"
    result = _run(pytester, SUITES, *ONE_CHECK, "--run-id", "embedded", f"--junitxml={junit}")
    lines = result.stdout.lines
    assert result.ret == 0, result.stdout.str()[-2000:]
    header = next(line for line in lines if line.startswith("specsuite "))
    assert header.startswith("specsuite server under test: the EMBEDDED REFERENCE EMULATION"), header
    assert "not a real SGLang server" in header
    summary_at = max(i for i, line in enumerate(lines) if "specsuite" in line and line.startswith("="))
    tail = "\n".join(lines[summary_at:])
    assert "server under test: the EMBEDDED REFERENCE EMULATION" in tail
    results = json.loads((pytester.path / "results" / "embedded" / "results.json").read_text())
    under_test = results["server_under_test"]
    assert under_test["embedded_reference"] is True and under_test["reference_emulation"] is True
    assert under_test["source"] == "embedded-reference"
    assert results["arms"]["fix"]["server_under_test"] == under_test
    assert server_under_test_line(Document.from_dict(results)).startswith("**Server under test: the embedded reference emulation**")
    xml = junit.read_text()
    assert '<property name="specsuite.embedded_reference" value="True"' in xml
    assert '<property name="specsuite.reference_emulation" value="True"' in xml


@pytest.fixture(scope="module")
def reference_by_url(tmp_path_factory):
    server = launch_reference_server("fix", log_dir=tmp_path_factory.mktemp("by-url"), ready_timeout_s=120)
    yield server
    server.stop()


def test_a_reference_server_reached_by_url_is_named_the_emulation(pytester, reference_by_url) -> None:
    result = _run(pytester, SUITES, *ONE_CHECK, "--collect-only", "--server-url", reference_by_url.base_url, "--require-server-url")
    header = next(line for line in result.stdout.lines if line.startswith("specsuite "))
    assert header.startswith("specsuite server under test: the REFERENCE EMULATION at http://127.0.0.1:"), header
    assert "EMBEDDED" not in header and "via server-url" in header


def _assert_refused(result: pytest.RunResult, started: float, why: str) -> None:
    err = result.stderr.str().strip()
    assert result.ret == 4, result.stdout.str()[-1500:] + err
    assert err.count("\n") == 0 and err.startswith("ERROR: specsuite: no server under test:"), err
    assert why in err and REFUSAL in err and "SPECSUITE_SERVER_URL" in err
    assert "Traceback" not in result.stdout.str() + err
    assert time.perf_counter() - started < 60


def test_require_server_url_refuses_the_fallback(pytester) -> None:
    started = time.perf_counter()
    _assert_refused(_run(pytester, SUITES, *ONE_CHECK, "--require-server-url"), started, "--require-server-url")
    assert not (pytester.path / "results").exists()  # refused before anything ran


def test_the_nightly_profile_refuses_the_fallback(pytester) -> None:
    started = time.perf_counter()
    _assert_refused(_run(pytester, SUITES, *ONE_CHECK, "--specsuite-profile", "nightly"), started, "--specsuite-profile nightly")


@pytest.mark.parametrize("argv, why", [
    (["run", "--profile", "nightly"], "--profile nightly"),
    (["run", "--require-server-url"], "--require-server-url"),
    (["gsm8k", "--require-server-url"], "--require-server-url"),
    (["bench", "--require-server-url"], "--require-server-url"),
])
def test_cli_commands_refuse_the_fallback_in_one_line(argv, why, tmp_path, capsys) -> None:
    started = time.perf_counter()
    assert cli.main([*argv, "--results-dir", str(tmp_path / "out")]) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("specsuite: error: no server under test:"), err
    assert why in err and REFUSAL in err
    assert time.perf_counter() - started < 10  # nothing was launched


def _minimal_results(under_test: dict | None) -> dict:
    arm = {"identity": {"base_url": "http://node:30000", "version": "0.5.23", "server_args": {}}, "cases": [], "workloads": {}}
    results = {"status": "complete", "run_id": "r", "arms": {"candidate": arm}}
    if under_test is not None:
        results["server_under_test"] = under_test
        arm["server_under_test"] = under_test
    return results


@pytest.mark.parametrize("under_test, first", [
    ({"embedded_reference": True, "reference_emulation": True, "source": "embedded-reference", "url": "http://127.0.0.1:1"},
     "**Server under test: the embedded reference emulation**"),
    ({"embedded_reference": False, "reference_emulation": True, "source": "server-url", "url": "http://127.0.0.1:1"},
     "**Server under test: the reference emulation**"),
    ({"embedded_reference": False, "reference_emulation": False, "source": "server-url", "url": "http://node:30000", "version": "0.5.23"},
     "Server under test: candidate http://node:30000 (version 0.5.23)."),
])
def test_the_report_opens_with_the_server_under_test(under_test, first, tmp_path) -> None:
    render_report(Document.from_dict(_minimal_results(under_test)), tmp_path)
    markdown = (tmp_path / "report.md").read_text()
    assert markdown.splitlines()[0].startswith(first), markdown[:300]
    body = (tmp_path / "report.html").read_text().split("<body>", 1)[1].lstrip()
    first_paragraph = body.split("</p>", 1)[0].replace("<strong>", "**").replace("</strong>", "**")
    banner = "emulation" if "emulation" in first else "real"  # the page's first element, styled as a banner
    assert first_paragraph.startswith(f'<p class="banner {banner}">' + first), first_paragraph


def test_old_results_are_judged_by_their_identity() -> None:
    """Results written before `server_under_test` existed: a reference server reports `refserver_arm`."""
    old = _minimal_results(None)
    assert server_under_test_line(Document.from_dict(old)).startswith("Server under test: candidate http://node:30000")
    old["arms"]["candidate"]["identity"]["server_args"]["refserver_arm"] = "fix"
    assert server_under_test_line(Document.from_dict(old)).startswith("**Server under test: the reference emulation**")
    assert server_under_test_line(Document.from_dict({"arms": {}})).startswith("Server under test: not recorded")
