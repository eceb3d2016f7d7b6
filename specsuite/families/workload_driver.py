"""What a family's workload driver is, and what it sees of the run's session.

A driver runs one family's workload on a server for every front end (the pytest suites, `specsuite gsm8k`,
`specsuite bench`): the RunSession (specsuite/session/run_session.py) builds one per registered family that has a
`driver` (specsuite.families.workload_family.WorkloadFamily), tells each when the server has started, collects their
warnings and closes them, and names no family. A driver reaches the session through `DriverSession` only, so a
family's package never imports the session layer above it.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol


class DriverSession(Protocol):
    """The parts of a RunSession a workload driver uses: its configuration, the server and its run folder, the fault
    guard, the workloads map results.json stores, the in-progress marker and the results write."""

    config: Any  # specsuite.session.config.RunConfig
    server: Any  # specsuite.server.session.ServerUnderTest, once started
    endpoint: Any  # specsuite.server.session.ServerEndpoint, once reached
    run_dir: Any  # specsuite.results.store.RunDirectory, once started
    writer: Any  # the server arm's record writer
    guard: Any  # specsuite.server.faults.FaultGuard
    workloads: dict[str, Any]

    def watch(self, what: str) -> AbstractContextManager[None]: ...

    def write_results(self, status: str) -> None: ...


class WorkloadDriver:
    """A family's driver; the hooks the session calls on every driver do nothing unless a family needs them."""

    def __init__(self, session: DriverSession) -> None:
        self.session = session

    def started(self) -> None:
        """The session's server was reached and identified, and its run folder opened."""

    def warnings(self) -> list[str]:
        """The warnings its workload collected so far (results.json's and the terminal summary's), in run order."""
        return []

    def close(self) -> None:
        """Release what the driver opened (another server it reached, say)."""
