"""Typed views of the results' free-form parts that the reports read.

The results model (specsuite.results.types) keeps a few parts as plain JSON objects: the kernel section's
shape and a session's JUnit outcome (in a repeat's `extra`); an arm's server identity is the model's own
`ArmIdentity`.  The reports read
them through these records, so no renderer digs through a dict by key; a key a record does not name
stays in its `extra`, and a part of the wrong shape reads as absent.
"""

from __future__ import annotations

from dataclasses import dataclass

from specsuite.results.types import Record


@dataclass
class KernelShape(Record):
    """The kernel suite's input shape."""

    batch: int | None = None
    steps: int | None = None
    kernel_vocab: int | None = None
    tokenizer_vocab: int | None = None
