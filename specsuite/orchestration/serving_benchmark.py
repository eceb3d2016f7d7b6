"""bench_serving's benchmark on a started RunSession, the one path of `specsuite bench` and `pytest suites -m perf`:
the BenchConfig from the one builder (specsuite/session/bench.py: the chosen settings over a profile) for the target
the serving benchmark's driver names (specsuite/families/bench/driver.py), then the driver's run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from specsuite.config.bench_profiles import BenchProfile
from specsuite.families.bench.family import FAMILY as BENCH
from specsuite.session.bench import build_bench_config
from specsuite.session.run_session import RunSession


def run_serving_benchmark(session: RunSession, chosen: Mapping[str, Any], profile: BenchProfile, *, output_file: str | None,
                          progress: bool = False, base_url: str | None = None, echo: Callable[[str], None] | None = None) -> dict[str, Any]:
    """One benchmark run against the session's server, or `base_url` (the suites' bench baseline); the record is
    appended to `output_file` when it ends."""
    driver = session.driver(BENCH.name)
    target = driver.target(base_url)
    options = session.config.server
    config = build_bench_config(chosen, profile, base_url=target.url, api_key=options.api_key, admin_api_key=options.admin_api_key,
                                server_kind=target.server_kind)
    return driver.run(config, target, output_file=output_file, progress=progress, echo=echo)
