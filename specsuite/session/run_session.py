"""One run's session, for every front end: it resolves the server, opens the run folder, the record writers and the
fault guard, drives the workloads that more than one front end runs (GSM8K: one driver for `pytest suites -m gsm8k`
and `specsuite gsm8k`), and writes results.json as they arrive. It knows nothing of pytest: the pytest plugin and
the CLI verbs adapt their options into a RunConfig and their own reporting around it.

results.json's document comes from the front end (`document`, one call: the results builder's place), since a pytest
session and `specsuite gsm8k` record different sections today.

Two ways to start, one server path (specsuite/server/session.py `start_server`: --server-url, else --launch, else the
embedded reference server; launched here, stopped by `close`):
* `start`: reach the server, then identify it (its kind, identity and vocabulary, which needs its tokenizer on this
  machine) and open a run folder (results.json, arms/<arm>/*.jsonl) with the fault guard: what the correctness
  workloads and GSM8K need to judge and record answers;
* `start_endpoint`: reach the server and ask it nothing more, and open no run folder: `specsuite bench`, whose
  benchmark (bench_serving's) needs only the URL, a tokenizer of its own choosing and the answers, and whose record is
  one line appended to its --output-file, bench_serving's convention (a launched server's log goes to the results
  folder). A separate method, not a flag on `start`: what it returns has no client, identity or vocabulary, so a
  flag would make every caller of `start` check for them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specsuite.config.bench_profiles import BenchProfile
from specsuite.errors import SpecsuiteError
from specsuite.families.gsm8k.records import Gsm8kRun
from specsuite.results.store import RecordWriter, RunDirectory
from specsuite.results.types import Document
from specsuite.server.faults import FaultGuard, RunPolicy, process_alive_probe
from specsuite.server.secrets import load_secrets
from specsuite.server.session import ServerEndpoint, ServerUnderTest, check_server_given, identify_server, start_server
from specsuite.session.config import RunConfig


def remove_if_empty(folder) -> None:
    try:
        folder.rmdir()  # only an empty folder goes
    except OSError:
        pass


SERVER_LOGS = "server-logs"  # where `specsuite bench` keeps the logs of the servers it launches


@dataclass
class RunSession:
    """The server, the run folder, its writer, the fault guard and the workloads' results of one run."""

    config: RunConfig
    document: Callable[[str], Document] | None = None  # results.json's content for a status (the results builder's call)
    after_workload: Callable[[], None] | None = None  # the front end's look at the guard once a workload ends
    server: ServerUnderTest | None = None
    endpoint: ServerEndpoint | None = None  # the reached server (both ways to start); `server` once identified
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
            from specsuite.families.gsm8k import load_gsm8k

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
            self.endpoint = start_server(options, self.run_dir.path)
            self.server = identify_server(self.endpoint, options)
        except (SpecsuiteError, KeyboardInterrupt):
            if self.endpoint is not None:
                self.endpoint.stop()  # an interrupted identification leaves no server behind either
                self.endpoint = None
            remove_if_empty(self.run_dir.path)  # a server never reached leaves no empty timestamped folder (a launch log stays)
            self.run_dir = None
            raise
        launched = self.server.launched
        self.guard = FaultGuard(policy, server_alive=process_alive_probe(lambda: launched.running) if launched is not None else None)
        self.writer = self.run_dir.record_writer(self.server.arm)
        return self.server

    def start_endpoint(self, *, reference_args: Sequence[str] = ()) -> ServerEndpoint:
        """Resolve and reach the server (launched here when asked) and ask it nothing: no identity, no vocabulary, no run
        folder (see the module docstring). `reference_args` go to an embedded reference server, which then checks the
        run's API key as a real server would."""
        options = self.config.server
        logs = Path(self.config.results_dir) / SERVER_LOGS  # not loose at the top of the results folder
        logs.mkdir(parents=True, exist_ok=True)
        self.endpoint = start_server(options, logs, reference_args=reference_args,
                                     reference_api_key=options.api_key)
        return self.endpoint

    def serving_benchmark(self, chosen: Mapping[str, Any], profile: BenchProfile, *, output_file: str | None, progress: bool = False,
                          base_url: str | None = None, echo: Callable[[str], None] | None = None) -> dict[str, Any]:
        """bench_serving's benchmark, the one driver of `specsuite bench` and `pytest suites -m perf`: the BenchConfig from
        the one builder (specsuite/session/bench.py: `chosen` over `profile`; an identified server's kind picks vLLM's
        backend), against the started server or `base_url` (the suites' bench baseline). The record is appended to
        `output_file` when it ends; on Ctrl-C the finished requests are saved first (specsuite/families/bench/runner.py),
        then the interrupt goes on."""
        from specsuite.families.bench.runner import run_benchmark
        from specsuite.server import kinds
        from specsuite.session.bench import build_bench_config

        if self.endpoint is None:
            raise SpecsuiteError("the serving benchmark needs a started session (no server under test yet)")
        options = self.config.server
        own_url = self.server.client.base_url if self.server is not None else self.endpoint.url  # the client's normal form
        url = base_url or own_url
        config = build_bench_config(chosen, profile, base_url=url, api_key=options.api_key, admin_api_key=options.admin_api_key,
                                    server_kind=kinds.kind_of_client(self.server.client).name if self.server is not None else None)
        # The session's own server carries how it was chosen; another URL (a bench baseline) is described by the record.
        under_test = None
        if url == own_url:
            under_test = self.server.server_under_test if self.server is not None else self.endpoint.server_under_test
        extra = {"echo": echo} if echo is not None else {}
        with self.watch("bench"):
            return run_benchmark(config, progress=progress, output_file=output_file, server_under_test=under_test, **extra)

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

    def gsm8k_result(self, temperature: float, *, progress: bool = False) -> Gsm8kRun:
        """Run GSM8K once per session and temperature; records go to gsm8k.jsonl as they finish. The typed run is
        returned; the stored dict (`gsm8k_runs`, results.json's workloads.gsm8k) is what the results builder writes."""
        from specsuite.families.gsm8k.on_server import run_gsm8k_on_server, temperature_key

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
                    alpha=self.config.alpha,
                )
                runs[key]["source"] = settings.path  # the report says when it was the synthetic set
            self.workloads["gsm8k"] = list(runs.values())  # one result per temperature
            self.write_results("running")
        return Gsm8kRun.from_dict(runs[key])

    def close(self) -> None:
        """Close the run folder and stop the server (a launched one too); safe to call more than once."""
        if self.run_dir is not None:
            self.run_dir.close()
        if self.server is not None:
            self.server.close()
        elif self.endpoint is not None:
            self.endpoint.stop()

    def __enter__(self) -> RunSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()  # on an error or Ctrl-C too: a launched server never outlives the command
