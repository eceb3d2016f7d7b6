"""HTTP helpers shared by the reference-server tests."""

from __future__ import annotations

import requests


def http_session() -> requests.Session:
    """A session that never routes localhost through a proxy (one per thread: not thread-safe)."""
    session = requests.Session()
    session.trust_env = False
    return session
