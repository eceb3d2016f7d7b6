"""The kernel tests' subprocess deadlines guard against a hang and grow with the machine's load: a test that checks
the suite's outcome must not fail because a shared machine was busy.

Before: `run_kernel_suite` gave every run a fixed 400 s, and two kernel tests failed at load 3-20 on 2 shared cores."""

from __future__ import annotations

import subprocess

import pytest

from tests.helpers import kernel_suite_runs


def test_the_deadline_grows_with_the_load(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    seen: list[float] = []

    def fake_run(command, **kwargs):
        seen.append(kwargs["timeout"])
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(kernel_suite_runs.subprocess, "run", fake_run)
    monkeypatch.setattr(kernel_suite_runs.os, "cpu_count", lambda: 2)
    for load in (0.5, 20.0):
        monkeypatch.setattr(kernel_suite_runs.os, "getloadavg", lambda load=load: (load, load, load))
        kernel_suite_runs.run_kernel_suite(tmp_path)
    idle, loaded = seen
    assert idle >= 400 and loaded >= idle * 10, seen  # load 20 on 2 cores: ten runs' worth of CPU contention
