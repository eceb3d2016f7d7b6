"""Typed views of the results' free-form parts that the reports read.

The results model (specsuite.results.types) keeps a few parts as plain JSON objects: an arm's server
identity (its /server_info, ServerIdentity.to_dict), how its server was chosen (`server_under_test`),
the kernel section's shape and a session's JUnit outcome (in a repeat's `extra`).  The reports read
them through these records, so no renderer digs through a dict by key; a key a record does not name
stays in its `extra`, and a part of the wrong shape reads as absent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from specsuite.results.types import Arm, Record, SpeculativeSettings

REFERENCE_MARKER_KEY = "refserver_arm"  # a /server_info key only the reference server reports


@dataclass
class SamplerDescription(Record):
    """The reference server's sampler (`refserver_sampler` among its server args)."""

    label: str | None = None
    device: str | None = None
    sha256: str | None = None


@dataclass
class ServerArgs(Record):
    """The server args the reports look at; every other one stays in `extra`."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {"refserver_sampler": ("one", SamplerDescription)}

    refserver_arm: Any = None  # REFERENCE_MARKER_KEY: written only by the reference server
    refserver_sampler: SamplerDescription | None = None


@dataclass
class ServerIdentityView(Record):
    """An arm's server identity as the reports read it."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {"speculative": ("one", SpeculativeSettings),
                                                             "server_args": ("one", ServerArgs)}

    version: str | None = None
    base_url: str | None = None
    speculative: SpeculativeSettings | None = None
    server_args: ServerArgs | None = None
    cuda_graph: Any = None
    vocab_size: int | None = None
    tokenizer_length: int | None = None

    @classmethod
    def of(cls, arm: Arm) -> ServerIdentityView:
        """The arm's identity; an empty one when the arm has none (or not an object)."""
        return cls.from_dict(arm.identity if isinstance(arm.identity, dict) else {})

    def is_reference(self) -> bool:
        """Whether the reference server reported it (it names REFERENCE_MARKER_KEY among its server args)."""
        return self.server_args is not None and self.server_args.has(REFERENCE_MARKER_KEY)


@dataclass
class KernelShape(Record):
    """The kernel suite's input shape."""

    batch: int | None = None
    steps: int | None = None
    kernel_vocab: int | None = None
    tokenizer_vocab: int | None = None
