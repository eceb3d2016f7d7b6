"""User-facing error type: everything the harness rejects is reported as one clear line.

The class is defined in kernel_loading.errors (the bottom of the import graph) so the reference
server, which never imports the harness, raises the same one; this is its name in the harness."""

from kernel_loading.errors import SpecsuiteError

__all__ = ["SpecsuiteError"]
