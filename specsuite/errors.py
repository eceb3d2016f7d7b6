"""User-facing error type: everything the project rejects is reported as one clear line.

It lives here, at the bottom of the import graph, so that the reference server and the harness
raise and catch the same class (specsuite.errors re-exports it under its usual name)."""


class SpecsuiteError(Exception):
    """An error with a one-line, user-facing message; the CLI prints it without a traceback."""
