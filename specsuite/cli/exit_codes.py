"""The `specsuite` exit codes, one place for every subcommand: 0 done, 1 checks failed, 2 error (one line),
130 interrupted. What "checks failed" means depends on the subcommand, so it has a name for each."""

EXIT_OK = 0
EXIT_CHECKS_FAILED = 1  # run: a --fail-on rule or the --profile nightly gate
EXIT_REGRESSION = EXIT_CHECKS_FAILED  # history: an open regression
EXIT_REQUESTS_FAILED = EXIT_CHECKS_FAILED  # bench: a request failed
EXIT_SERVER_FAILED = EXIT_CHECKS_FAILED  # serve-sglang, serve-vllm: the server exited or must not be used
EXIT_ERROR = 2
EXIT_INTERRUPTED = 130
