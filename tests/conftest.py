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
