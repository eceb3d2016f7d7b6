"""pytest parametrization of the correctness suite (suites/test_correctness.py, and the A/B and nightly suites that
run its cases): `sampling_case` over the run's sampling grid and `sampled_case` over its sampling (T > 0) cases,
both read from the one grid the correctness driver computes (specsuite/families/correctness/driver.py), which
runs the cases too.
"""

from __future__ import annotations

import pytest

from specsuite.errors import SpecsuiteError


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    wanted = [name for name in ("sampling_case", "sampled_case") if name in metafunc.fixturenames]
    if not wanted:
        return
    # Imported late, as the other plugins do: an early import of specsuite.pytest_plugin.core defeats its assertion rewriting.
    from specsuite.pytest_plugin.core import specsuite_session

    try:
        driver = specsuite_session(metafunc.config).correctness
        cases = {"sampling_case": driver.grid, "sampled_case": driver.sampled}
    except SpecsuiteError:
        cases = {}  # a bad setting is reported once, in one line, when the session starts
    for name in wanted:
        chosen = cases.get(name, [])
        metafunc.parametrize(name, chosen, ids=[case.case_id for case in chosen])
