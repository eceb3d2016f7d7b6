# Functions of .ci/vllm-job (sourced; tests/ci/test_vllm_job_lib.py runs them against stand-ins).
# Needs OUT (the job's folder) and the array `pids` (the serve-vllm processes started so far).

# Say that a server exited and show the end of every server file, so the reason reaches the CI log.
# `tail -n 5`, not `tail -5`: tail refuses the obsolete form with several files
# ("option used in invalid context -- 5") and the reason was lost.
report_exited_server() {
  echo "vllm job: a vLLM server exited:"
  tail -n 5 "$OUT"/serve-*.out "$OUT"/vllm-*.log 2>/dev/null || true
}

# wait_ready PORT [SECONDS]: until /health answers; exit 1 (with the servers' last lines) when a
# started server has exited or the time is up.
wait_ready() {
  local port="$1" limit="${2:-900}" pid
  for _ in $(seq 1 "$limit"); do
    curl -sf -m 5 "http://127.0.0.1:$port/health" >/dev/null && return 0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null || { report_exited_server; exit 1; }; done
    sleep 1
  done
  curl -sf -m 5 "http://127.0.0.1:$port/health" >/dev/null && return 0
  echo "vllm job: vLLM on $port not ready in $limit s"
  exit 1
}

# stop_server PID: SIGTERM to one serve-vllm (it stops vLLM's whole process group) and wait for it;
# the pid leaves `pids`.
stop_server() {
  local stopped="$1" kept=() pid
  kill -TERM "$stopped" 2>/dev/null || true
  wait "$stopped" 2>/dev/null || true
  for pid in "${pids[@]}"; do [ "$pid" = "$stopped" ] || kept+=("$pid"); done
  pids=("${kept[@]}")
}
