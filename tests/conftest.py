"""Fixtures shared by the project's own tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def fault(proxy):
    """Set the module's fault proxy (its `proxy` fixture) to one fault for one test; always back
    to pass-through afterwards."""
    def set_fault(name: str | None) -> None:
        proxy.fault = name
    yield set_fault
    proxy.fault = None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist with `--dist loadgroup` (the README's test command): the suites stay on one worker (one
    session, so one embedded server and one results file), and each test module of tests/ stays on one worker (its
    module-scoped servers start once)."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    suites_dir = config.rootpath / "suites"
    for item in items:
        group = "suites" if item.path.is_relative_to(suites_dir) else str(item.path.relative_to(config.rootpath))
        item.add_marker(pytest.mark.xdist_group(group))
