"""Run each (server, temperature) workload once per test module, on first use."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

Result = TypeVar("Result")


def cached_workloads(servers: Mapping[str, str], run: Callable[[str, float], Result]) -> Callable[[str, float], Result]:
    """`get(server_name, temperature)` runs `run(url, temperature)` the first time and caches it."""
    cache: dict[tuple[str, float], Result] = {}

    def get(server: str, temperature: float) -> Result:
        if (server, temperature) not in cache:
            cache[server, temperature] = run(servers[server], temperature)
        return cache[server, temperature]

    return get
