"""pytest suites that run against a speculative-decoding server (see conftest.py for options)."""
