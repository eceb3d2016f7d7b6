"""The specsuite pytest plugin itself, run through pytester in subprocesses: options, test ids,
the identity header, failure text on the no-fix arm, and one-line connection errors."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from pathlib import Path

import pytest

from specsuite.server.launcher import launch_reference_server

pytest_plugins = ("pytester",)

REPO = Path(__file__).resolve().parents[2]
SUITES = str(REPO / "suites")
FAST = ["-p", "no:cacheprovider", "--specsuite-profile", "smoke", "--temperatures", "0,1.0", "--top-p", "0.95"]


@pytest.fixture(scope="module")
def nofix_server(tmp_path_factory):
    server = launch_reference_server("nofix", log_dir=tmp_path_factory.mktemp("nofix"), ready_timeout_s=120)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory):
    server = launch_reference_server("fix", log_dir=tmp_path_factory.mktemp("keyed"), extra_args=("--api-key", "plugin-test-secret-key"),
                                     ready_timeout_s=120, api_key="plugin-test-secret-key")
    yield server
    server.stop()


def _run(pytester: pytest.Pytester, *args: str, timeout: float = 300) -> pytest.RunResult:
    pytester.chdir()
    return pytester.runpytest_subprocess(*args, "--results-dir", str(pytester.path / "results"), timeout=timeout)


def test_option_group_is_registered(pytester):
    result = _run(pytester, SUITES, "--help")
    text = result.stdout.str()
    for option in ("--server-url", "--launch", "--arm-name", "--temperatures", "--top-p", "--specsuite-profile", "--specsuite-seed", "--results-dir",
                   "--tokenizer", "--vocab-size"):
        assert option in text
    assert "specsuite" in text


def test_ids_and_header_name_the_case(pytester, nofix_server):
    result = _run(pytester, SUITES, "--collect-only", "-q", "--server-url", nofix_server.base_url, *FAST)
    out = result.stdout.str()
    assert "test_no_invalid_token_ids[t=1-top_p=0.95]" in out
    assert "test_no_invalid_token_ids[t=0-top_p=0.95]" in out
    assert "test_stray_rate_not_above_greedy_control[t=1-top_p=0.95]" in out
    header = _run(pytester, SUITES, "--collect-only", "--server-url", nofix_server.base_url, *FAST).stdout.str()
    assert "specsuite server:" in header
    assert "EAGLE" in header and "8128" in header


def test_nofix_fails_on_token_validity_with_counts(pytester, nofix_server):
    # nofix emits the fallback vocab_size - 1 (8127): zero tolerance; it emits no id outside [0, vocab_size).
    result = _run(pytester, SUITES, "-m", "correctness", "-k", "invalid_token_ids or fallback_ids", "--server-url", nofix_server.base_url, *FAST)
    out = result.stdout.str()
    assert result.ret == 1
    result.assert_outcomes(passed=3, failed=1)
    assert "token validity: sampler fallback ids at t=1-top_p=0.95:" in out
    assert "8127" in out
    assert "95% upper bound" in out and "example: prompt" in out


def test_results_are_written_per_request(pytester, nofix_server):
    _run(pytester, SUITES, "-m", "correctness", "-k", "invalid_token_ids", "--server-url", nofix_server.base_url,
         "--run-id", "plugin-run", "--arm-name", "nofix", *FAST)
    run = pytester.path / "results" / "plugin-run"
    records = (run / "arms" / "nofix" / "requests.jsonl").read_text().splitlines()
    assert len(records) == 2 * 24
    results = (run / "results.json").read_text()
    assert '"schema_version"' in results and '"t=1-top_p=0.95"' in results


def _assert_one_line_error(result: pytest.RunResult, started: float, fragment: str) -> None:
    err = result.stderr.str().strip()
    assert result.ret == 4
    assert err.count("\n") == 0, err
    assert err.startswith("ERROR: specsuite: ") and fragment in err
    assert "Traceback" not in result.stdout.str() + err
    assert time.perf_counter() - started < 30


def test_refused_port_is_one_line(pytester):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    started = time.perf_counter()
    _assert_one_line_error(_run(pytester, SUITES, "--server-url", f"http://127.0.0.1:{port}"), started, "connection refused")


def test_non_sglang_server_is_one_line(pytester):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        started = time.perf_counter()
        result = _run(pytester, SUITES, "--server-url", f"http://127.0.0.1:{server.server_address[1]}")
        _assert_one_line_error(result, started, "does not look like an SGLang or vLLM server")
    finally:
        server.shutdown()


def test_missing_api_key_is_one_line(pytester, keyed_server, monkeypatch):
    monkeypatch.delenv("SPECSUITE_API_KEY", raising=False)
    started = time.perf_counter()
    result = _run(pytester, SUITES, "--server-url", keyed_server.base_url)
    _assert_one_line_error(result, started, "SPECSUITE_API_KEY")
    assert "plugin-test-secret-key" not in result.stdout.str() + result.stderr.str()


class _Item:
    """What lossless_family_size reads of a collected pytest item: its marks."""

    def __init__(self, *marks: str) -> None:
        self.marks = set(marks)

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.marks else None


def test_lossless_family_is_the_lossless_tests_collected_and_each_gets_its_share_of_the_budget():
    from specsuite.pytest_plugin.lossless import lossless_family_size
    from specsuite.stats import family_budget

    items = [_Item("lossless")] * 8 + [_Item("correctness"), _Item("lossless", "skip")]  # an empty parametrization is skipped
    members = lossless_family_size(items)  # type: ignore[arg-type]
    assert members == 8
    assert family_budget(0.001, members).per_test_alpha == pytest.approx(0.001 / 8)
