"""The one builder of results documents, for every front end.

Each front end says what it measured; these functions lay it out as a `Document`
(specsuite.results.types) that `RunDirectory.write_results` writes:

- `session_document`: a pytest session (each arm it measured, one repeat each) and
  ``specsuite gsm8k`` (one arm, one repeat holding ``workloads.gsm8k``);
- `measured_arm`: the arm of a server the session opened (its identity, vocab, how it was chosen);
- `run_document`: the header ``specsuite run``'s merger starts from (the merger then adds one
  repeat per session it ran);
- `comparison_of`: arms given as their repeats, for comparisons built in memory (the ab suite, the
  nightly baseline from the history, the perf suite's interleaved benchmark runs).

The header fields (schema version, times, run id, status check) stay specsuite.results.store's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from specsuite.results.types import Arm, Case, Document, KernelSection, Repeat, Workloads


class _ToDict(Protocol):
    def to_dict(self) -> dict[str, Any]: ...


class OpenedServer(Protocol):
    """What the builder needs of an opened server (specsuite.server.session.ServerUnderTest)."""

    server_under_test: dict[str, Any]
    identity: _ToDict
    vocab: _ToDict


def session_repeat(cases: Sequence[Case], workloads: Workloads, seed: int | None, repeat: int = 1) -> Repeat:
    """The repeat a session writes for an arm it measured: its cases and workloads."""
    return Repeat(repeat=repeat, seed=seed, cases=list(cases), workloads=workloads, key_order=("repeat", "seed", "cases", "workloads"))


def measured_arm(server: OpenedServer, cases: Sequence[Case], workloads: Workloads, seed: int | None) -> Arm:
    """The arm of an opened server, with the one repeat this session measured."""
    return Arm(server_under_test=server.server_under_test, identity=server.identity.to_dict(), vocab=server.vocab.to_dict(),
               repeats=[session_repeat(cases, workloads, seed)])


def session_document(*, status: str, server_under_test: dict[str, Any], arms: Mapping[str, Arm], seed: int | None,
                     command: str, warnings: Sequence[str] = (), profile: str | None = None,
                     faults: dict[str, Any] | None = None, sections: Mapping[str, Any] | None = None) -> Document:
    """A pytest session's or ``specsuite gsm8k``'s document. ``sections`` are the plugins' own
    top-level sections (``kernel``, ...): kept as they are, the kernel section typed."""
    rest = dict(sections or {})
    kernel = rest.pop("kernel", None)
    # The keys every session writes, empty or not, in the order the pytest session has always written them.
    order = ("status", "server_under_test", "warnings", "seed", *(("profile",) if profile is not None else ()), "command",
             *(("faults",) if faults is not None else ()), "arms", *(sections or {}))
    return Document(status=status, server_under_test=server_under_test, warnings=list(warnings), seed=seed, profile=profile,
                    command=command, faults=faults, arms=dict(arms),
                    kernel=KernelSection.from_dict(kernel) if isinstance(kernel, dict) else None,
                    extra={**rest, **({} if kernel is None or isinstance(kernel, dict) else {"kernel": kernel})}, key_order=order)


def run_document(*, embedded: bool, seed: int | None, profile: str | None, repeats: int, markers: str | None,
                 pytest_options: Sequence[str], command: str, arm_order: Sequence[str]) -> Document:
    """The header ``specsuite run``'s merger starts from, the document it fills in place: the arms
    in run order, the baseline last, no arm measured yet."""
    return Document(status="running", seed=seed, profile=profile, repeats=repeats, command=command,
                    server_under_test={"embedded_reference": embedded, "reference_emulation": embedded,
                                       "source": "embedded-reference" if embedded else "arms"},
                    arm_order=list(arm_order), baseline_arm=arm_order[-1], markers=markers, pytest_options=list(pytest_options),
                    key_order=("status", "server_under_test", "seed", "profile", "repeats", "markers", "pytest_options",
                               "command", "arm_order", "baseline_arm", "arms"))


def comparison_of(arms: Mapping[str, Sequence[Repeat]], baseline: str) -> Document:
    """Arms given as their repeats, as a document the A/B (`compare_arms`) reads: the candidates in the
    order given, the baseline last.  For comparisons built in memory (the ab suite, the nightly baseline
    from the history, the perf suite's interleaved benchmark runs)."""
    order = [name for name in arms if name != baseline] + [baseline]
    return Document(arm_order=order, baseline_arm=baseline, arms={name: Arm(repeats=list(arms[name])) for name in order},
                    key_order=("schema_version", "arm_order", "baseline_arm", "arms"))


def bench_repeats(runs: Sequence[Mapping[str, Any]]) -> list[Repeat]:
    """Benchmark summaries, one repeat each, in run order."""
    return [session_repeat([], Workloads.from_dict({"bench": dict(run)}), None, repeat=number) for number, run in enumerate(runs, start=1)]
