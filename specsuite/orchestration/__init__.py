"""`specsuite run`'s orchestration: one pytest session per arm, repeat and part, run in child processes from the
installed `suites` package (`python -m pytest --pyargs specsuite.suites`), their results merged into one run folder."""
