"""One run's session, for every front end: it resolves the server, opens the run folder, the record writers and the
fault guard, drives the workloads that more than one front end runs (GSM8K: one driver for `pytest suites -m gsm8k`
and `specsuite gsm8k`), and writes results.json as they arrive. It knows nothing of pytest: the pytest plugin and
the CLI verbs adapt their options into a RunConfig and their own reporting around it.

results.json's document comes from the front end (`document`, one call: the results builder's place), since a pytest
session and `specsuite gsm8k` record different sections today.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from harness.errors import SpecsuiteError
from harness.results.store import RecordWriter, RunDirectory
from harness.results.types import Document
from harness.server.faults import FaultGuard, RunPolicy, process_alive_probe
from harness.server.secrets import load_secrets
from harness.server.session import ServerUnderTest, check_server_given, open_server
from harness.session.config import RunConfig


def remove_if_empty(folder) -> None:
    try:
        folder.rmdir()  # only an empty folder goes
    except OSError:
        pass


@dataclass
class RunSession:
    """The server, the run folder, its writer, the fault guard and the workloads' results of one run."""

    config: RunConfig
    document: Callable[[str], Document] | None = None  # results.json's content for a status (the results builder's call)
    after_workload: Callable[[], None] | None = None  # the front end's look at the guard once a workload ends
    server: ServerUnderTest | None = None
    run_dir: RunDirectory | None = None
    writer: RecordWriter | None = None
    guard: FaultGuard | None = None
    workloads: dict[str, Any] = field(default_factory=dict)  # stored under arms.<arm>.repeats[0].workloads
    gsm8k_runs: dict[str, dict[str, Any]] = field(default_factory=dict)  # by temperature key
    in_progress: str | None = None  # the workload running now, for "where it stopped"
    _gsm8k_items: list[Any] | None = None

    def gsm8k_items(self) -> list[Any]:
        """The GSM8K questions (loaded once; a front end may ask before the server starts, so a bad path costs no server)."""
        if self._gsm8k_items is None:
            from harness.workloads.gsm8k import load_gsm8k

            self._gsm8k_items = load_gsm8k(self.config.gsm8k.path)
        return self._gsm8k_items

    def start(self) -> ServerUnderTest:
        """Resolve, reach and identify the server; open the results folder, the writer and the fault guard."""
        options = self.config.server
        policy = RunPolicy.parse(self.config.fault_policy)
        # Refuse a forbidden fallback before the results folder exists: nothing was run.
        check_server_given(options.server_url, options.launch, options.require_server_url, options.require_reason)
        self.run_dir = RunDirectory(self.config.results_dir, run_id=self.config.run_id, secrets=load_secrets())
        try:
            self.server = open_server(options, self.run_dir.path)
        except (SpecsuiteError, KeyboardInterrupt):
            remove_if_empty(self.run_dir.path)  # a server never reached leaves no empty timestamped folder (a launch log stays)
            self.run_dir = None
            raise
        launched = self.server.launched
        self.guard = FaultGuard(policy, server_alive=process_alive_probe(lambda: launched.running) if launched is not None else None)
        self.writer = self.run_dir.record_writer(self.server.arm)
        return self.server

    @contextmanager
    def watch(self, what: str) -> Iterator[None]:
        """Name the workload in progress (kept when it is interrupted); then let the front end look at the guard."""
        self.in_progress = what
        interrupted = False
        try:
            yield
        except KeyboardInterrupt:
            interrupted = True
            raise
        finally:
            if not interrupted:
                self.in_progress = None
            if self.after_workload is not None:
                self.after_workload()

    def write_results(self, status: str) -> None:
        if self.run_dir is not None and self.document is not None:
            self.run_dir.write_results(self.document(status))

    def gsm8k_result(self, temperature: float, *, progress: bool = False) -> dict[str, Any]:
        """Run GSM8K once per session and temperature; records go to gsm8k.jsonl as they finish."""
        from harness.workloads.gsm8k.on_server import run_gsm8k_on_server, temperature_key

        key = temperature_key(temperature)
        runs = self.gsm8k_runs
        if key not in runs:
            if self.server is None or self.run_dir is None:
                raise SpecsuiteError("GSM8K needs a started session (no server under test yet)")
            settings = self.config.gsm8k
            items = self.gsm8k_items()
            writer = self.run_dir.record_writer(self.server.arm, "gsm8k")
            with self.watch(f"gsm8k {key}"):
                runs[key] = run_gsm8k_on_server(
                    self.server.client, self.server.vocab, items, temperature=temperature, num_questions=settings.num_questions,
                    num_shots=settings.num_shots, parallel=settings.parallel, seed=self.config.seed, shots_from_eval=settings.shots_from_eval,
                    progress=progress, record_sink=lambda record: writer.write({"temperature": temperature, **record}), guard=self.guard,
                )
                runs[key]["source"] = settings.path  # the report says when it was the synthetic set
            self.workloads["gsm8k"] = list(runs.values())  # one result per temperature
            self.write_results("running")
        return runs[key]

    def close(self) -> None:
        """Close the run folder and stop the server (a launched one too)."""
        if self.run_dir is not None:
            self.run_dir.close()
        if self.server is not None:
            self.server.close()
