"""The `specsuite` exit codes, one place for every subcommand: 0 done, 1 checks failed (a `--fail-on` rule
or the `--profile nightly` gate), 2 error (one line), 130 interrupted."""

EXIT_OK = 0
EXIT_CHECKS_FAILED = 1
EXIT_ERROR = 2
EXIT_INTERRUPTED = 130
