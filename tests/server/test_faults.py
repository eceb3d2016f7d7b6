"""Fault injection: every fault becomes a recorded error class next to its
request, the documented policy (specsuite/server/faults.py) decides whether the run goes on, results are still
written, and every scenario ends within a bound.

Faults come from tests/helpers/misbehaving_server.py: in-process for the client and workload tests,
as a launched process for the end-to-end runs, where SIGTERM also reaches `pytest suites/` and
`specsuite run` while they work.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from specsuite.errors import SpecsuiteError
from specsuite.families.correctness.prompts import load_prompts
from specsuite.families.correctness.workload import Profile, SamplingCase, run_case
from specsuite.families.gsm8k import load_gsm8k
from specsuite.families.gsm8k.on_server import run_gsm8k_on_server
from specsuite.results.store import load_results, read_records
from specsuite.server.faults import (
    ErrorClass,
    FaultGuard,
    RequestFault,
    RunPolicy,
    RunStopped,
    check_generate_result,
    check_stream_result,
    classify,
    parse_retry_after,
)
from specsuite.server.interrupts import child_pids, terminate_as_interrupt, wait_for_exit
from specsuite.server.kinds.sglang.client import SGLangClient
from specsuite.server.launcher import find_free_port
from specsuite.server.vocab import load_vocab_info
from tests.helpers.misbehaving_server import MODEL_DIR, MisbehavingServer

REPO = Path(__file__).resolve().parents[2]
PAYLOAD = {"text": "How many bags?", "sampling_params": {"max_new_tokens": 8}, "return_logprob": True}
READ_TIMEOUT_S = 1.0
BOUND_S = 5.0  # any single fault must resolve within this


@pytest.fixture(scope="module")
def server():
    with MisbehavingServer(stall_s=10.0) as running:
        yield running


@pytest.fixture
def client(server):
    with SGLangClient(server.url, timeout_s=READ_TIMEOUT_S, connect_timeout_s=1.0) as fresh:
        yield fresh


@pytest.fixture(scope="module")
def vocab():
    return load_vocab_info(str(MODEL_DIR))


@pytest.fixture(scope="module")
def prompts():
    return load_prompts()


def no_sleep_guard(policy: RunPolicy | None = None, server_alive=None) -> tuple[FaultGuard, list[float]]:
    slept: list[float] = []
    return FaultGuard(policy or RunPolicy(), server_alive=server_alive, sleep=slept.append), slept


# --------------------------------------------------------------------------- every fault, one request
NON_STREAM = [
    ("http_500", ErrorClass.HTTP_5XX),
    ("http_503", ErrorClass.HTTP_5XX),
    ("http_429", ErrorClass.HTTP_429),
    ("reset", ErrorClass.CONNECTION_RESET),
    ("stall", ErrorClass.TIMEOUT),
    ("missing_meta_info", ErrorClass.MISSING_META_INFO),
    ("bad_finish_reason", ErrorClass.BAD_FINISH_REASON),
    ("non_json_body", ErrorClass.RESPONSE_NOT_JSON),
]
STREAM = [
    ("http_500", ErrorClass.HTTP_5XX),
    ("http_429", ErrorClass.HTTP_429),
    ("reset", ErrorClass.CONNECTION_RESET),
    ("stall", ErrorClass.TIMEOUT),
    ("stream_truncated", ErrorClass.STREAM_TRUNCATED),
    ("stream_non_json", ErrorClass.STREAM_NON_JSON),
    ("stream_error_object", ErrorClass.STREAM_ERROR_OBJECT),
    ("missing_meta_info", ErrorClass.MISSING_META_INFO),
    ("bad_finish_reason", ErrorClass.BAD_FINISH_REASON),
]


@pytest.mark.parametrize(("fault", "expected"), NON_STREAM, ids=[f for f, _ in NON_STREAM])
def test_non_stream_fault_is_classified_quickly(server, client, fault, expected):
    server.set_faults([fault])
    guard, _ = no_sleep_guard(RunPolicy(max_retries=0))
    started = time.monotonic()
    with pytest.raises(SpecsuiteError) as caught:
        guard.run(lambda: client.generate(PAYLOAD), check_generate_result)
    assert time.monotonic() - started < BOUND_S
    assert classify(caught.value) is expected, str(caught.value)
    assert guard.counts == {expected.value: 1}
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("fault", "expected"), STREAM, ids=[f for f, _ in STREAM])
def test_stream_fault_is_classified_quickly(server, client, fault, expected):
    server.set_faults([fault])
    guard, _ = no_sleep_guard(RunPolicy(max_retries=0))
    started = time.monotonic()
    with pytest.raises(SpecsuiteError) as caught:
        guard.run(lambda: list(client.generate_stream(PAYLOAD)), check_stream_result)
    assert time.monotonic() - started < BOUND_S
    assert classify(caught.value) is expected, str(caught.value)


def test_well_formed_answers_pass_both_checks(server, client):
    server.set_faults(["ok", "ok"])
    guard, _ = no_sleep_guard()
    assert guard.run(lambda: client.generate(PAYLOAD), check_generate_result).attempts == 1
    final = guard.run(lambda: list(client.generate_stream(PAYLOAD)), check_stream_result).value
    assert final["meta_info"]["finish_reason"]["type"] in ("length", "stop")
    assert not guard.counts


# --------------------------------------------------------------------------- the policy, unit by unit
def test_retry_after_is_read_as_seconds_or_date():
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now=parse_date("Wed, 21 Oct 2015 07:28:00 GMT")) == 30.0
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


def parse_date(text: str):
    import email.utils

    return email.utils.parsedate_to_datetime(text)


def test_429_and_503_are_retried_honouring_retry_after_up_to_the_cap():
    guard, slept = no_sleep_guard(RunPolicy(max_retries=3, retry_after_cap_s=10.0, backoff_s=0.5))
    answers = iter([RequestFault(ErrorClass.HTTP_429, "busy", status=429, retry_after_s=2.0),
                    RequestFault(ErrorClass.HTTP_5XX, "down", status=503, retry_after_s=3600.0),
                    RequestFault(ErrorClass.HTTP_5XX, "down", status=503), "fine"])

    def send():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    outcome = guard.run(send)
    assert (outcome.value, outcome.attempts) == ("fine", 4)
    assert slept == [2.0, 10.0, 2.0]  # server's value; capped; backoff 0.5 * 2**2
    assert guard.retries == 3 and not guard.counts


def raiser(exc: Exception):
    def send():
        raise exc

    return send


def test_retries_are_bounded_and_other_statuses_are_not_retried():
    guard, slept = no_sleep_guard(RunPolicy(max_retries=2))
    with pytest.raises(RequestFault):
        guard.run(raiser(RequestFault(ErrorClass.HTTP_429, "busy", status=429, retry_after_s=1.0)))
    assert slept == [1.0, 1.0] and guard.counts == {"http_429": 1}
    with pytest.raises(RequestFault):
        guard.run(raiser(RequestFault(ErrorClass.HTTP_5XX, "boom", status=500)))
    assert slept == [1.0, 1.0] and guard.counts == {"http_429": 1, "http_5xx": 1}
    assert not guard.stopped  # isolated 5xx/429: the run goes on


def test_consecutive_connection_failures_stop_the_run_and_an_answer_resets_the_count():
    guard, _ = no_sleep_guard(RunPolicy(max_consecutive_connection_failures=3))
    refused = RequestFault(ErrorClass.CONNECTION_REFUSED, "refused")
    for _ in range(2):
        guard.record_failure(refused)
    guard.record_answer()
    guard.record_failure(refused)
    guard.record_failure(RequestFault(ErrorClass.TIMEOUT, "stalled"))
    assert not guard.stopped
    guard.record_failure(RequestFault(ErrorClass.CONNECTION_RESET, "reset"))
    assert guard.stopped and "3 connection failures in a row" in guard.stop_reason
    with pytest.raises(RunStopped):
        guard.run(lambda: pytest.fail("must not send after a stop"))


def test_server_process_gone_stops_at_the_first_connection_failure():
    guard, _ = no_sleep_guard(server_alive=lambda: False)
    guard.record_failure(RequestFault(ErrorClass.HTTP_5XX, "boom", status=500))
    assert not guard.stopped  # only connection failures ask whether the process lives
    guard.record_failure(RequestFault(ErrorClass.CONNECTION_REFUSED, "refused"))
    assert guard.stopped and "server process is gone" in guard.stop_reason


def test_content_faults_never_stop_the_run():
    guard, _ = no_sleep_guard(RunPolicy(max_consecutive_connection_failures=1))
    for error_class in set(ErrorClass) - {ErrorClass.CONNECTION_REFUSED, ErrorClass.CONNECT_TIMEOUT,
                                          ErrorClass.CONNECTION_RESET, ErrorClass.TIMEOUT}:
        guard.record_failure(RequestFault(error_class, "x"))
    assert not guard.stopped


def test_policy_spec_parses_and_rejects_with_one_line():
    assert RunPolicy.parse("consecutive=5, retries=0,retry_cap=2.5") == RunPolicy(5, 0, 2.5, 1.0)
    assert RunPolicy.parse("") == RunPolicy()
    for bad, fragment in (("consecutive", "name=value"), ("speed=3", "name=value"), ("retries=x", "needs a number"),
                          ("consecutive=0", "at least 1")):
        with pytest.raises(SpecsuiteError, match=fragment):
            RunPolicy.parse(bad)


@pytest.mark.parametrize(("answer", "expected"), [
    ({"error": {"message": "x"}}, ErrorClass.ERROR_OBJECT),
    ({"text": "", "output_ids": []}, ErrorClass.MISSING_META_INFO),
    ({"text": "", "output_ids": [], "meta_info": {"finish_reason": {"type": "length", "length": 1}, "prompt_tokens": 1}},
     ErrorClass.MISSING_META_INFO),
    ({"meta_info": {"finish_reason": None, "prompt_tokens": 1, "completion_tokens": 0}}, ErrorClass.BAD_FINISH_REASON),
    ({"meta_info": {"finish_reason": {"type": "eos"}, "prompt_tokens": 1, "completion_tokens": 0}}, ErrorClass.BAD_FINISH_REASON),
    ({"meta_info": {"finish_reason": {"type": "length", "length": "8"}, "prompt_tokens": 1, "completion_tokens": 0}}, ErrorClass.BAD_FINISH_REASON),
    ({"meta_info": {"finish_reason": {"type": "abort", "message": "oom"}, "prompt_tokens": 1, "completion_tokens": 0}}, ErrorClass.SERVER_ABORT),
    ([{"meta_info": {"finish_reason": {"type": "stop", "matched": 2}, "prompt_tokens": 1, "completion_tokens": 1}}, "x"],
     ErrorClass.MALFORMED_RESPONSE),
])
def test_answer_shape_checks(answer, expected):
    with pytest.raises(RequestFault) as caught:
        check_generate_result(answer)
    assert caught.value.error_class is expected


# --------------------------------------------------------------------------- the correctness workload
CASE = SamplingCase(0.0, 1.0)


def test_isolated_faults_are_recorded_with_their_request_and_the_run_goes_on(server, vocab, prompts):
    # One request at a time, so the script's order is the request order.
    script = ["ok", "http_500", "http_429", "ok", "missing_meta_info", "bad_finish_reason", "non_json_body", "reset", "stall"]
    server.set_faults(script)
    records: list[dict] = []
    guard = FaultGuard(RunPolicy(backoff_s=0.01))
    started = time.monotonic()
    with SGLangClient(server.url, timeout_s=READ_TIMEOUT_S) as client:
        result = run_case(client, vocab, CASE, prompts, Profile("faults", len(script) - 1, 8, 1), record_sink=records.append, guard=guard)
    assert time.monotonic() - started < 3 * BOUND_S
    by_index = {record["request_index"]: record for record in records}
    assert len(records) == len(script) - 1  # the 429 was retried: one extra attempt, one record
    expected = [None, "http_5xx", None, "missing_meta_info", "bad_finish_reason", "response_not_json", "connection_reset", "timeout"]
    assert [by_index[i].get("error_class") for i in range(len(expected))] == expected
    assert by_index[2]["status"] == "ok" and by_index[2]["attempts"] == 2
    failed = by_index[1]
    assert failed["status"] == "error" and failed["request"]["text"] == prompts[1].prompt
    assert failed["request"]["sampling_params"]["max_new_tokens"] == 8 and failed["prompt_id"] == prompts[1].id
    summary = result.to_dict()
    assert summary["n_errors"] == 6 and summary["n_skipped"] == 0 and summary["stopped"] is None
    assert summary["error_classes"] == {"bad_finish_reason": 1, "connection_reset": 1, "http_5xx": 1, "missing_meta_info": 1,
                                        "response_not_json": 1, "timeout": 1}
    assert guard.retries == 1 and not guard.stopped


def test_server_crash_mid_run_stops_the_run_and_skips_the_rest(vocab, prompts):
    records: list[dict] = []
    guard = FaultGuard(RunPolicy(max_consecutive_connection_failures=3))
    with MisbehavingServer(["ok"] * 5 + ["crash"]) as crashing, SGLangClient(crashing.url, timeout_s=READ_TIMEOUT_S) as client:
        started = time.monotonic()
        result = run_case(client, vocab, CASE, prompts, Profile("crash", 40, 8, 4), record_sink=records.append, guard=guard)
        elapsed = time.monotonic() - started
        assert crashing.crashed
    assert elapsed < BOUND_S
    statuses = [record["status"] for record in records]
    assert len(records) == 40  # every planned request is accounted for
    assert statuses.count("ok") == 5 and statuses.count("skipped") > 0
    classes = {record["error_class"] for record in records if record["status"] == "error"}
    assert classes <= {"connection_reset", "connection_refused"} and "connection_refused" in classes
    assert result.stopped and "connection failures in a row" in result.stopped
    assert result.to_dict()["n_skipped"] == statuses.count("skipped")
    with pytest.raises(RunStopped):  # the next case does not even start
        run_case(client, vocab, CASE, prompts, Profile("crash", 4, 8, 4), guard=guard)


def test_stalled_server_stops_after_consecutive_timeouts(vocab, prompts):
    with MisbehavingServer(default="stall", stall_s=10.0) as stalled, SGLangClient(stalled.url, timeout_s=0.5) as client:
        started = time.monotonic()
        result = run_case(client, vocab, CASE, prompts, Profile("stall", 30, 8, 3), guard=FaultGuard())
        elapsed = time.monotonic() - started
    assert elapsed < BOUND_S  # three parallel 0.5 s timeouts, not 30 of them
    assert result.error_classes["timeout"] >= 3 and result.skipped >= 20
    assert "timeout" in result.stopped


def test_gsm8k_records_error_classes_requests_and_skips(vocab):
    items = load_gsm8k("synthetic")
    records: list[dict] = []
    with MisbehavingServer(["ok", "http_500", "ok", "crash"]) as crashing, SGLangClient(crashing.url, timeout_s=READ_TIMEOUT_S) as client:
        guard = FaultGuard(RunPolicy(max_consecutive_connection_failures=2))
        result = run_gsm8k_on_server(client, vocab, items, temperature=0.0, num_questions=20, num_shots=2, parallel=1,
                                     record_sink=records.append, guard=guard)
    assert len(records) == 20
    errors = [record for record in records if record["status"] == "error"]
    assert errors[0]["error_class"] == "http_5xx" and "Question:" in errors[0]["request"]["text"]
    assert result["n_skipped"] == sum(record["status"] == "skipped" for record in records) > 0
    assert result["error_classes"]["http_5xx"] == 1 and guard.stopped


# --------------------------------------------------------------------------- whole runs, as processes
def _misbehaving_command(port: int, pid_file: Path, *options: str) -> str:
    return (f"{sys.executable} -m tests.helpers.misbehaving_server --port {port} --pid-file {pid_file} " + " ".join(options)).strip()


def _process_gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


def _wait_for(predicate, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def _only_run_dir(results: Path) -> Path:
    folders = [p for p in results.iterdir() if p.is_dir()]
    assert len(folders) == 1, folders
    return folders[0]


PYTEST_SUITE = [sys.executable, "-m", "pytest", "suites/test_correctness.py", "-p", "no:cacheprovider", "-q",
                "--temperatures", "0,1.0", "--top-p", "1.0", "--specsuite-profile", "smoke"]


def test_launched_server_crash_stops_the_session_with_junit_and_results(tmp_path):
    """A real crash: the server process exits; the policy stops at once, JUnit and results.json say so."""
    pid_file, junit = tmp_path / "server.pid", tmp_path / "junit.xml"
    command = _misbehaving_command(find_free_port(), pid_file, "--faults", ",".join(["ok"] * 30 + ["crash"]))
    started = time.monotonic()
    completed = subprocess.run([*PYTEST_SUITE, "--launch", command, "--results-dir", str(tmp_path / "results"), f"--junitxml={junit}"],
                               cwd=REPO, capture_output=True, text=True, timeout=120)
    assert time.monotonic() - started < 90
    assert completed.returncode == 2, completed.stdout[-2000:] + completed.stderr[-2000:]  # pytest: interrupted
    assert "server process is gone" in completed.stdout
    run_dir = _only_run_dir(tmp_path / "results")
    results = load_results(run_dir)
    assert results.status == "interrupted" and "server process is gone" in results.stopped_at
    assert results.faults["stop_reason"] and results.faults["error_classes"]
    records = read_records(run_dir / "arms" / "candidate" / "requests.jsonl")
    assert sum(r["status"] == "ok" for r in records) == 30 and any(r["status"] == "skipped" for r in records)
    assert len([r for r in records if r["case_id"] == records[-1]["case_id"]]) == 24  # the broken case: all accounted for
    suite = ET.parse(junit).getroot()
    assert int(suite.find("testsuite").get("tests") if suite.tag == "testsuites" else suite.get("tests")) > 0
    assert _process_gone(int(pid_file.read_text()))


def _start_and_wait_for_records(command: list[str], records_glob: str, results: Path) -> subprocess.Popen:
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    found = _wait_for(lambda: any(path.stat().st_size > 0 for path in results.glob(records_glob)), 90)
    if not found:
        process.kill()
        pytest.fail(f"no records appeared: {process.communicate()[0][-2000:]}")
    return process


def test_sigterm_to_pytest_writes_junit_results_and_stops_the_server(tmp_path):
    pid_file, junit, results = tmp_path / "server.pid", tmp_path / "junit.xml", tmp_path / "results"
    command = _misbehaving_command(find_free_port(), pid_file, "--faults", "ok", "--default", "slow", "--slow-s", "3")
    process = _start_and_wait_for_records([*PYTEST_SUITE, "--launch", command, "--results-dir", str(results), f"--junitxml={junit}"],
                                          "*/arms/*/requests.jsonl", results)
    signalled = time.monotonic()
    process.send_signal(signal.SIGTERM)
    output = process.communicate(timeout=60)[0]
    assert time.monotonic() - signalled < 20, output[-2000:]
    assert process.returncode == 2, output[-2000:]  # pytest's "interrupted"
    document = load_results(_only_run_dir(results))
    assert document.status == "interrupted" and "during case t=0-top_p=1" in document.stopped_at
    assert junit.is_file() and ET.parse(junit).getroot() is not None
    assert _wait_for(lambda: _process_gone(int(pid_file.read_text())), 10)


def test_sigterm_to_specsuite_run_lets_the_session_clean_up(tmp_path):
    pid_file, results = tmp_path / "server.pid", tmp_path / "results"
    command = _misbehaving_command(find_free_port(), pid_file, "--faults", "ok", "--default", "slow", "--slow-s", "3")
    run = [sys.executable, "-m", "specsuite.cli.main", "run", "--arm", f"slowarm={command}", "--results-dir", str(results),
           "--temperatures", "0", "--top-p", "1.0", "--no-report"]
    process = _start_and_wait_for_records(run, "*/sessions/*/arms/*/requests.jsonl", results)
    signalled = time.monotonic()
    process.send_signal(signal.SIGTERM)
    output = process.communicate(timeout=60)[0]
    assert time.monotonic() - signalled < 30, output[-2000:]
    assert process.returncode == 130, output[-2000:]
    assert "interrupted (SIGTERM): stopping slowarm repeat 1" in output  # said at once
    run_dir = _only_run_dir(results)
    assert load_results(run_dir).status == "interrupted"
    # The session either finished its own cleanup within specsuite run's grace (3 s) or was killed, and its results say which.
    session = load_results(run_dir / "sessions" / "slowarm-r1")
    assert session.status == "interrupted"
    assert "during case" in session.stopped_at or "killed by specsuite run" in session.stopped_at, session.stopped_at
    assert _wait_for(lambda: _process_gone(int(pid_file.read_text())), 10)
    assert not [pid for pid in _children_of(process.pid)], "a pytest session outlived specsuite run"


def _children_of(pid: int) -> list[int]:
    return child_pids(pid)


@pytest.fixture(autouse=True)
def _no_proxy_environment(monkeypatch):
    # The subprocess runs talk to 127.0.0.1 only; a proxy variable must not reroute them.
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p))


def test_sigterm_becomes_keyboard_interrupt_and_is_restored():
    original = signal.signal(signal.SIGTERM, signal.SIG_DFL)  # this session's plugin installed one already
    try:
        restore = terminate_as_interrupt()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)  # the handler runs at the next bytecode boundary
        restore()
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL

        def someone_elses(signum, frame):
            pass

        signal.signal(signal.SIGTERM, someone_elses)
        terminate_as_interrupt()
        assert signal.getsignal(signal.SIGTERM) is someone_elses  # left alone
    finally:
        signal.signal(signal.SIGTERM, original)


def test_only_children_in_our_process_group_are_waited_for():
    same_group = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    own_session = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        assert same_group.pid in child_pids(process_group=os.getpgrp())
        assert own_session.pid not in child_pids(process_group=os.getpgrp())
        assert own_session.pid in child_pids()
        same_group.terminate()
        assert wait_for_exit([same_group.pid], 5)
        assert same_group.poll() is not None  # waiting did not reap it from under Popen
    finally:
        for process in (same_group, own_session):
            process.kill()
            process.wait()
