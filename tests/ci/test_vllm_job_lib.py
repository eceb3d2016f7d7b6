"""The vLLM job's shell functions (.ci/vllm_job_lib.sh), against stand-in servers: when a server exits
before it is ready, the job says so and shows the last lines of every server file (the `tail -5` form
tail refuses with several files lost them), and exits 1 without a hang."""

from __future__ import annotations

import subprocess
from pathlib import Path

LIB = Path(__file__).resolve().parents[2] / ".ci" / "vllm_job_lib.sh"


def _bash(script: str, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", f"set -euo pipefail; OUT={out}; source {LIB}; {script}"],
                          capture_output=True, text=True, timeout=60)


def test_an_exited_server_shows_every_files_last_lines(tmp_path):
    (tmp_path / "serve-eagle.out").write_text("".join(f"eagle line {i}\n" for i in range(9)))
    (tmp_path / "serve-none.out").write_text("specsuite: starting\nnone died: CUDA? no, CPU: out of memory\n")
    (tmp_path / "vllm-none-18162.log").write_text("RuntimeError: the engine core died\n")
    run = _bash("sleep 0 & pids=($!); wait; wait_ready 1 30; echo unreachable", tmp_path)
    assert run.returncode == 1 and "unreachable" not in run.stdout
    assert "vllm job: a vLLM server exited:" in run.stdout
    assert "invalid context" not in run.stderr
    for line in ("eagle line 8", "eagle line 4", "none died: CUDA? no, CPU: out of memory", "RuntimeError: the engine core died"):
        assert line in run.stdout
    assert "eagle line 3" not in run.stdout  # five lines per file


def test_a_server_never_ready_times_out_with_one_line(tmp_path):
    run = _bash("sleep 30 >/dev/null 2>&1 & pids=($!); wait_ready 1 1; echo unreachable", tmp_path)
    assert run.returncode == 1 and run.stdout.strip().endswith("vllm job: vLLM on 1 not ready in 1 s")


def test_stop_server_stops_one_and_keeps_the_rest(tmp_path):
    run = _bash("sleep 30 & a=$!; sleep 30 & b=$!; pids=($a $b); stop_server $a; "
                "kill -0 $a 2>/dev/null && echo a-alive; echo kept ${#pids[@]} $([ ${pids[0]} = $b ] && echo b); kill $b", tmp_path)
    assert run.returncode == 0 and "a-alive" not in run.stdout and "kept 1 b" in run.stdout
