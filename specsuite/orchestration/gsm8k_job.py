"""`specsuite gsm8k`'s job: GSM8K at each of the run's temperatures on one server, through the RunSession's GSM8K driver
(specsuite/families/gsm8k/driver.py, the one `pytest suites -m gsm8k` uses), into one results folder whose results.json
holds one arm and one repeat with `workloads.gsm8k`. The command line prints what it returns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specsuite.errors import SpecsuiteError
from specsuite.families.gsm8k.family import FAMILY as GSM8K
from specsuite.families.gsm8k.records import Gsm8kRun
from specsuite.results.builder import measured_arm, session_document
from specsuite.results.types import Document, Workloads
from specsuite.server.session import describe_server_under_test
from specsuite.session.config import RunConfig
from specsuite.session.dependencies import preflight
from specsuite.session.run_session import RunSession


@dataclass(frozen=True)
class Gsm8kJobOutcome:
    """What the job measured: each temperature's run by its key, where results.json went, and the server it ran on."""

    runs: dict[str, Gsm8kRun]
    results_path: Path
    server_under_test: dict[str, Any]


def run_gsm8k_job(config: RunConfig, *, command: str, progress: bool = False,
                  echo: Callable[[str], None] = lambda line: None) -> Gsm8kJobOutcome:
    """Check what the settings need, start the server, run GSM8K at every temperature, write results.json (complete,
    or interrupted with the temperature it stopped at) and stop the server. `echo` gets the lines to show as they come
    (the server under test, each run's warnings)."""
    missing = preflight(gsm8k_path=config.gsm8k.path, uses_gsm8k=True, tokenizer=config.server.tokenizer, results_dir=config.results_dir)
    if missing:  # a package or a local path it needs: one line before any server starts
        raise SpecsuiteError(missing)
    session = RunSession(config)
    driver = session.driver(GSM8K.name)
    driver.items()  # a bad --gsm8k-path fails here, before any server starts
    server = session.start()
    run_dir = session.run_dir
    echo(describe_server_under_test(server.server_under_test))

    def document(status: str) -> Document:  # one arm, one repeat holding workloads.gsm8k, as it stands now
        return session_document(status=status, server_under_test=server.server_under_test, warnings=session.warnings(), seed=config.seed,
                                command=command, arms={server.arm: measured_arm(server, [], Workloads.from_dict(dict(session.workloads)), config.seed)})

    session.document = document
    temperature = None
    try:
        for temperature in config.gsm8k.temperatures:
            for line in driver.result(temperature, progress=progress).warnings:
                echo(line)
            session.write_results("running")
    except KeyboardInterrupt:
        run_dir.mark_interrupted(f"GSM8K at temperature {temperature}")
        raise
    finally:
        session.close()
    session.write_results("complete")
    return Gsm8kJobOutcome({key: Gsm8kRun.from_dict(raw) for key, raw in driver.runs.items()}, run_dir.results_path, server.server_under_test)
