"""User-facing error type: everything the harness rejects is reported as one clear line."""


class SpecsuiteError(Exception):
    """An error with a one-line, user-facing message; the CLI prints it without a traceback."""
