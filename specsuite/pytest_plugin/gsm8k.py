"""pytest parametrization of the GSM8K suite (suites/test_gsm8k.py): `gsm8k_temperature` over the run's GSM8K
temperatures, as the GSM8K driver (specsuite/families/gsm8k/driver.py) runs them.
"""

from __future__ import annotations

import pytest

from specsuite.errors import SpecsuiteError
from specsuite.families.gsm8k.on_server import temperature_key


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "gsm8k_temperature" not in metafunc.fixturenames:
        return
    # Imported late, as the other plugins do: an early import of specsuite.pytest_plugin.core defeats its assertion rewriting.
    from specsuite.pytest_plugin.core import GSM8K, specsuite_session

    try:
        temperatures = specsuite_session(metafunc.config).core.driver(GSM8K).temperatures
    except SpecsuiteError:
        temperatures = []  # a bad setting is reported once, in one line, when the session starts
    metafunc.parametrize("gsm8k_temperature", temperatures, ids=[temperature_key(t) for t in temperatures])
