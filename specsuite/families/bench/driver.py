"""The serving benchmark's workload driver: bench_serving's benchmark, the one driver of `specsuite bench` and
`pytest suites -m perf`, against the session's server (identified, or only reached: `specsuite bench`) or another URL
(the suites' bench baseline). The benchmark's configuration comes from the session layer's one builder
(specsuite/orchestration/serving_benchmark.py over specsuite/session/bench.py), for the `target` the driver names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from specsuite.errors import SpecsuiteError
from specsuite.families.bench.records import bench_runs
from specsuite.families.workload_driver import WorkloadDriver
from specsuite.results.types import Workloads
from specsuite.server import kinds

if TYPE_CHECKING:
    from specsuite.families.bench.runner import BenchConfig


@dataclass(frozen=True)
class BenchTarget:
    """Where a benchmark run goes: the URL, the identified server's kind (it picks vLLM's backend), and how the server
    was chosen when it is the session's own (another URL, a bench baseline, is described by the record)."""

    url: str
    server_kind: str | None
    server_under_test: dict[str, Any] | None


class BenchDriver(WorkloadDriver):
    """Runs the benchmark on request; its summary, once a suite stores it (`workloads.bench`), carries its warnings."""

    def target(self, base_url: str | None = None) -> BenchTarget:
        """The session's own server, or `base_url` when given."""
        session = self.session
        if session.endpoint is None:
            raise SpecsuiteError("the serving benchmark needs a started session (no server under test yet)")
        server = session.server
        own_url = server.client.base_url if server is not None else session.endpoint.url  # the client's normal form
        url = base_url or own_url
        under_test = None
        if url == own_url:
            under_test = server.server_under_test if server is not None else session.endpoint.server_under_test
        return BenchTarget(url, kinds.kind_of_client(server.client).name if server is not None else None, under_test)

    def run(self, config: BenchConfig, target: BenchTarget, *, output_file: str | None, progress: bool = False,
            echo: Callable[[str], None] | None = None) -> dict[str, Any]:
        """One benchmark run of `config` at `target`. The record is appended to `output_file` when it ends; on Ctrl-C the
        finished requests are saved first (specsuite/families/bench/runner.py), then the interrupt goes on."""
        from specsuite.families.bench.runner import run_benchmark  # aiohttp loads when a benchmark runs, not with the registry

        extra = {"echo": echo} if echo is not None else {}
        with self.session.watch("bench"):
            return run_benchmark(config, progress=progress, output_file=output_file, server_under_test=target.server_under_test, **extra)

    def warnings(self) -> list[str]:
        runs = bench_runs(Workloads.from_dict(self.session.workloads))  # none unless the benchmark wrote its summary
        return [f"serving benchmark: {line}" for bench in runs for line in bench.warnings or []]
