"""Typed views of the server sections a document keeps as dicts: how a server was chosen, what it reports of
itself (its identity, speculative settings and args), its vocabulary sizes; and the ``fail_on`` outcome."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from specsuite.results.types.record import Record


@dataclass
class ArmVocab(Record):
    """An arm's ``vocab`` (specsuite.server.vocab.VocabInfo.to_dict), read typed where a rule needs its sizes."""

    tokenizer_length: int | None = None
    vocab_size: int | None = None
    padded_row_count: int | None = None


@dataclass
class ServerChoice(Record):
    """A ``server_under_test`` record (specsuite.server.session; the run's or an arm's): how the server was chosen and
    what it is, read typed."""

    kernel_only: bool | None = None  # a kernel-only session: no server at all
    embedded_reference: bool | None = None  # the embedded reference server, started because no server was given
    reference_emulation: bool | None = None  # specsuite's reference server (a CPU emulation), however it was reached
    source: str | None = None  # server-url, launch, embedded-reference (`specsuite run`'s document: arms)
    url: str | None = None
    version: str | None = None
    server_kind: str | None = None


@dataclass
class SpeculativeSettings(Record):
    """The speculative-decoding settings a server reports (an identity's ``speculative``), read typed."""

    speculative_algorithm: str | None = None
    speculative_num_steps: int | None = None
    speculative_eagle_topk: int | None = None
    speculative_num_draft_tokens: int | None = None
    speculative_use_rejection_sampling: bool | None = None


# A /server_info key only the reference server reports: how a reader tells the reference emulation from a real server.
REFERENCE_MARKER_KEY = "refserver_arm"


@dataclass
class SamplerDescription(Record):
    """The reference server's sampler (`refserver_sampler` among its server args)."""

    label: str | None = None
    device: str | None = None
    sha256: str | None = None


@dataclass
class ServerArgs(Record):
    """A server's args as its /server_info reports them: open-ended, so every arg but the two the reference server
    adds stays in ``extra`` (``to_dict`` gives them all back as written)."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {"refserver_sampler": ("one", SamplerDescription)}

    refserver_arm: Any = None  # REFERENCE_MARKER_KEY: written only by the reference server
    refserver_sampler: SamplerDescription | None = None


class HasIdentity(Protocol):
    """An arm (specsuite.results.types.document.Arm), as far as its identity goes."""

    identity: dict[str, Any] | None


@dataclass
class ArmIdentity(Record):
    """An arm's ``identity`` (specsuite.server.identity.ServerIdentity.to_dict), read typed: by the history, to place a
    run in its configuration's trend, and by the reports."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {"speculative": ("one", SpeculativeSettings),
                                                             "server_args": ("one", ServerArgs)}

    base_url: str | None = None
    model_path: str | None = None
    served_model_name: str | None = None
    version: str | None = None
    tokenizer_length: int | None = None
    vocab_size: int | None = None
    speculative: SpeculativeSettings | None = None
    cuda_graph: Any = None
    server_args: ServerArgs | None = None

    @classmethod
    def of(cls, arm: HasIdentity) -> ArmIdentity:
        """The arm's identity; an empty one when the arm has none (or not an object)."""
        return cls.from_dict(arm.identity if isinstance(arm.identity, dict) else {})

    def is_reference(self) -> bool:
        """Whether the reference server reported it (it names REFERENCE_MARKER_KEY among its server args)."""
        return self.server_args is not None and self.server_args.has(REFERENCE_MARKER_KEY)


@dataclass
class FailOnVerdict(Record):
    """A document's ``fail_on`` outcome (specsuite.analysis.fail_on.FailOnOutcome.to_dict), read typed: whether a rule fired."""

    failed: bool | None = None
