"""The GSM8K family's workload driver: GSM8K on the session's server, once per temperature, for `pytest suites -m
gsm8k` and `specsuite gsm8k` alike. Records go to arms/<arm>/gsm8k.jsonl as they finish; the stored runs (results.json's
`workloads.gsm8k`, one per temperature) are what the results builder writes.
"""

from __future__ import annotations

from typing import Any

from specsuite.errors import SpecsuiteError
from specsuite.families.gsm8k import GSM8KItem, load_gsm8k
from specsuite.families.gsm8k.on_server import run_gsm8k_on_server, temperature_key
from specsuite.families.gsm8k.records import Gsm8kRun
from specsuite.families.workload_driver import DriverSession, WorkloadDriver

RESULTS_KEY = "gsm8k"  # its place among the session's workloads


class Gsm8kDriver(WorkloadDriver):
    """The session's GSM8K runs, by temperature key."""

    def __init__(self, session: DriverSession) -> None:
        super().__init__(session)
        self.runs: dict[str, dict[str, Any]] = {}
        self._items: list[GSM8KItem] | None = None

    @property
    def temperatures(self) -> list[float]:
        return list(self.session.config.gsm8k.temperatures)

    def items(self) -> list[GSM8KItem]:
        """The GSM8K questions (loaded once; a front end may ask before the server starts, so a bad path costs no server)."""
        if self._items is None:
            self._items = load_gsm8k(self.session.config.gsm8k.path)
        return self._items

    def result(self, temperature: float, *, progress: bool = False) -> Gsm8kRun:
        """Run GSM8K once per session and temperature; later calls read the stored run."""
        session = self.session
        key = temperature_key(temperature)
        if key not in self.runs:
            if session.server is None or session.run_dir is None:
                raise SpecsuiteError("GSM8K needs a started session (no server under test yet)")
            config, settings = session.config, session.config.gsm8k
            items = self.items()
            writer = session.run_dir.record_writer(session.server.arm, "gsm8k")
            with session.watch(f"gsm8k {key}"):
                self.runs[key] = run_gsm8k_on_server(
                    session.server.client, session.server.vocab, items, temperature=temperature, num_questions=settings.num_questions,
                    num_shots=settings.num_shots, parallel=settings.parallel, seed=config.seed, shots_from_eval=settings.shots_from_eval,
                    progress=progress, record_sink=lambda record: writer.write({"temperature": temperature, **record}), guard=session.guard,
                    alpha=config.alpha,
                )
                self.runs[key]["source"] = settings.path  # the report says when it was the synthetic set
            session.workloads[RESULTS_KEY] = list(self.runs.values())  # one result per temperature
            session.write_results("running")
        return Gsm8kRun.from_dict(self.runs[key])

    def warnings(self) -> list[str]:
        return [line for run in self.runs.values() for line in Gsm8kRun.from_dict(run).warnings or []]
