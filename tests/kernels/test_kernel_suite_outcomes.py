"""The kernel suite against the two SGLang releases, as a user runs it (a pytest subprocess, CPU,
Triton's interpreter): 0.5.20 (the unguarded kernel) must fail on exactly the fallback and acceptance
invariants of the corrupted classes, 0.5.23 (the fix) must pass everything.  A suite that stops
catching the bug, or starts flagging the fix, turns this red.  Also: bad kernel sources are one
line and exit 4, and a kernel-only session starts no server."""

from __future__ import annotations

from pathlib import Path

import pytest

from specsuite.reports.server_under_test import server_under_test_line
from specsuite.results.types import Document
from tests.helpers.kernel_suite_runs import hang_guard_s, run_kernel_suite, run_kernel_suite_env

# What 0.5.20 breaks, per invariant, at the default shapes and seed 0.  The NaN classes are not
# here: 0.5.20's `q_val == q_val` guard and its NaN-false accept test handle NaN correctly.
# in-target-support adds the accepted drafts with p(X) = 0 (coin * (-inf) < p accepts them) to the
# fallback ids without target mass.
EXPECTED_0_5_20_FAILURES = {
    "no-unsupported-fallback": ["neg-inf-run-spares-draft", "draft-q-posinf", "draft-q-above-one", "q-row-posinf"],
    "no-invalid-q-accepted": ["neg-inf-run-covers-draft", "draft-q-zero", "draft-q-negative", "draft-q-above-one",
                              "q-row-zero", "q-row-neginf", "partial-prefix-q-negative"],
    "in-target-support": ["neg-inf-run-spares-draft", "neg-inf-run-covers-draft", "draft-q-posinf", "draft-q-above-one",
                          "q-row-posinf", "q-row-neginf"],
}


@pytest.mark.slow
def test_the_bug_release_fails_on_its_classes(tmp_path: Path) -> None:
    done, results = run_kernel_suite(tmp_path, "--kernel", "sglang==0.5.20")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    assert results is not None and results["status"] == "complete"
    kernel = results["kernel"]
    assert kernel["failing"] == EXPECTED_0_5_20_FAILURES
    assert kernel["device"] and kernel["sha256"] and kernel["version"] == "0.5.20"
    assert results["arms"] == {}  # no server was started
    # The failure names the class and one example row, as the user reads it.
    assert "no-invalid-q-accepted [neg-inf-run-covers-draft]" in done.stdout
    assert "row 0" in done.stdout and "q(X) -inf" in done.stdout
    # "FAILED path::test[id]", followed by " - message" where the terminal is wide or CI=true is set.
    failed = {line.split(" - ", 1)[0].split("::", 1)[1] for line in done.stdout.splitlines() if line.startswith("FAILED")}
    assert failed == {f"test_no_fallback_without_target_mass[{c}]" for c in EXPECTED_0_5_20_FAILURES["no-unsupported-fallback"]} | {
        f"test_invalid_draft_q_never_accepted[{c}]" for c in EXPECTED_0_5_20_FAILURES["no-invalid-q-accepted"]} | {
        f"test_committed_ids_within_target_support[{c}]" for c in EXPECTED_0_5_20_FAILURES["in-target-support"]}
    # 0.5.20 samples correctly from well-formed input: the distribution family does not fire, and every row
    # of the rule input follows token verification's rule at its coins.
    assert not any(test["rejected"] for test in kernel["distribution"]["tests"])
    assert kernel["rule"]["passed"] and kernel["rule"]["verification"] == "token", kernel["rule"]


@pytest.mark.slow
def test_the_fixed_release_passes(tmp_path: Path) -> None:
    done, results = run_kernel_suite(tmp_path, "--kernel", "sglang==0.5.23")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    kernel = results["kernel"]
    assert kernel["failing"] == {} and kernel["version"] == "0.5.23"
    assert kernel["rule"]["passed"] and kernel["rule"]["rows"] == 256, kernel["rule"]
    tests = kernel["distribution"]["tests"]
    assert tests and all(t["p_value"] is not None for t in tests if t["scenario"] == "well-formed")
    assert "passed" in done.stdout.splitlines()[-1]
    # No server ran, and every output says so rather than naming one (or the embedded default).
    assert results["server_under_test"]["kernel_only"] is True
    assert server_under_test_line(Document.from_dict(results)).startswith("No server under test: a kernel-only session, the sampler kernel sglang==0.5.23")


@pytest.mark.parametrize(("options", "expected"), [
    (["--kernel", "nonsense"], "--kernel 'nonsense': expected installed, sglang==VERSION"),
    (["--kernel", "missing_file.py"], "--kernel 'missing_file.py': no such file"),
    (["--kernel", "refserver", "--tokenizer-vocab", "9000"], "--tokenizer-vocab must lie in"),
    (["--kernel", "refserver", "--kernel-batch", "0"], "--kernel-batch must be between 1 and 4096"),
])
def test_bad_kernel_options_are_one_line(tmp_path: Path, options: list[str], expected: str) -> None:
    done, _ = run_kernel_suite(tmp_path, *options, timeout=120)
    assert done.returncode == 4
    assert expected in done.stderr and "Traceback" not in done.stderr + done.stdout
    assert len([line for line in done.stderr.splitlines() if line.strip()]) == 1


def test_offline_without_sglang_or_cached_wheel_is_one_line(tmp_path: Path) -> None:
    """No cache and no reachable package index: one line naming the problem and the way out."""
    done, _ = run_kernel_suite_env(tmp_path, ["--kernel", "sglang==0.5.21"], {
        "SPECSUITE_CACHE_DIR": str(tmp_path / "empty-cache"), "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
        "PIP_EXTRA_INDEX_URL": "", "PIP_FIND_LINKS": "", "PIP_NO_INDEX": "0", "PIP_RETRIES": "0", "PIP_TIMEOUT": "2",
        "PIP_CONFIG_FILE": "/dev/null"})
    assert done.returncode == 4, done.stdout[-2000:] + done.stderr[-2000:]
    line = done.stderr.strip()
    assert "cannot fetch sglang==0.5.21" in line and "--kernel PATH" in line and "\n" not in line
    assert "Traceback" not in done.stderr + done.stdout


def test_refserver_kernel_runs_without_a_server(tmp_path: Path) -> None:
    """The numpy sampler behind the kernel signature passes the suite, and no server starts even
    with --server-url pointing nowhere (the kernel tests do not use it)."""
    done, results = run_kernel_suite(tmp_path, "--kernel", "refserver", "--server-url", "http://127.0.0.1:9",
                                     "--kernel-dist-rows", "256", "-k", "well-formed or p-equals-q", timeout=200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert results["kernel"]["label"].startswith("reference numpy sampler") and results["arms"] == {}


def test_without_kernel_option_or_sglang_the_suite_skips_with_its_reason(tmp_path: Path) -> None:
    import importlib.util

    if importlib.util.find_spec("sglang") is not None:
        pytest.skip("SGLang is installed here: the suite would test it")
    done, results = run_kernel_suite(tmp_path, "-rs", timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "no --kernel given and no SGLang installed" in done.stdout and " passed" not in done.stdout.splitlines()[-1]
    assert results is None  # nothing was measured, so no results folder


def test_the_skip_line_is_printed_only_when_the_kernel_suite_is_asked_for(tmp_path: Path) -> None:
    """`-m kernel` announces why the suite skips; a run that merely collects the kernel tests (a plain
    `pytest suites/`) leaves the reason to pytest's own skip report instead of printing it every time."""
    import importlib.util
    import subprocess
    import sys

    if importlib.util.find_spec("sglang") is not None:
        pytest.skip("SGLang is installed here: the suite would test it")
    asked, _ = run_kernel_suite(tmp_path, timeout=120)
    assert "specsuite kernel: skipped (no --kernel given" in asked.stdout
    command = [sys.executable, "-m", "pytest", "suites/", "-k", "test_kernel or test_ab", "-q", "-rs", "-p", "no:cacheprovider",
               "--results-dir", str(tmp_path / "mixed")]
    mixed = subprocess.run(command, cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=hang_guard_s(180),
                           check=False)
    assert mixed.returncode == 0, mixed.stdout[-2000:] + mixed.stderr[-2000:]
    assert "specsuite kernel: skipped" not in mixed.stdout
    assert "no --kernel given and no SGLang installed" in mixed.stdout  # still said, in the skip report
