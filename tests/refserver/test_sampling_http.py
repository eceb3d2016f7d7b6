"""Sampling parameters and a fault arm over real HTTP: what a black-box client comparing speculation
on against off sees.

Three reference servers are started once for this module: the fix arm, the same with
`--fault-relaxed-penalties --fault-verify-ignores-logit-bias`, and speculation off.  Greedy requests with
penalties and logit_bias through /generate and /v1/completions give the speculation-off ids on the fix
arm and other ids on the faulty one; /server_info names the faults; a bad logit_bias is one 400 line.
"""

from __future__ import annotations

import pytest

from specsuite.server.launcher import launch_reference_server
from tests.helpers.http_sessions import http_session
from tests.refserver.sampling_runs import PROMPTS

TIMEOUT_S = (5, 60)
FAULTS = ("--fault-relaxed-penalties", "--fault-verify-ignores-logit-bias")
# " =" and "\n" in the reference tokenizer (tests/refserver/test_sampling_fault_arms.py checks they are single ids).
BANNED = {"282": -100.0, "198": -100.0}


@pytest.fixture(scope="module")
def urls(tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("refserver-sampling")
    with launch_reference_server("fix", log_dir, ready_timeout_s=60) as fix, \
            launch_reference_server("fix", log_dir, FAULTS, ready_timeout_s=60) as faulty, \
            launch_reference_server("fix", log_dir, ("--speculative-algorithm", "NONE"), ready_timeout_s=60) as off:
        yield {"fix": fix.base_url, "faulty": faulty.base_url, "off": off.base_url}


@pytest.fixture(scope="module")
def http():
    with http_session() as session:
        yield session


def _generate_ids(http, url: str, params: dict) -> list[list[int]]:
    body = {"text": PROMPTS, "sampling_params": {"temperature": 0, "max_new_tokens": 120, "ignore_eos": True, **params}}
    response = http.post(f"{url}/generate", json=body, timeout=TIMEOUT_S)
    assert response.status_code == 200, response.text
    return [item["output_ids"] for item in response.json()]


@pytest.mark.parametrize("params", [{"frequency_penalty": 1.0}, {"presence_penalty": 2.0}, {"logit_bias": BANNED}], ids=str)
def test_generate_fix_arm_matches_speculation_off_and_the_fault_arm_does_not(http, urls, params):
    reference = _generate_ids(http, urls["off"], params)
    assert _generate_ids(http, urls["fix"], params) == reference
    assert _generate_ids(http, urls["faulty"], params) != reference


def test_completions_take_penalties_and_logit_bias(http, urls):
    def texts(url: str) -> list[str]:
        body = {"model": "m", "prompt": PROMPTS[:3], "temperature": 0, "max_tokens": 80, "frequency_penalty": 1.0,
                "logit_bias": BANNED, "min_tokens": 5}
        response = http.post(f"{url}/v1/completions", json=body, timeout=TIMEOUT_S)
        assert response.status_code == 200, response.text
        return [choice["text"] for choice in sorted(response.json()["choices"], key=lambda c: c["index"])]

    reference = texts(urls["off"])
    assert texts(urls["fix"]) == reference and all(" =" not in text and "\n" not in text for text in reference)


def test_server_info_names_the_fault_arms(http, urls):
    assert http.get(f"{urls['faulty']}/server_info", timeout=TIMEOUT_S).json()["refserver_faults"] == sorted(
        flag.removeprefix("--fault-") for flag in FAULTS)
    assert http.get(f"{urls['fix']}/server_info", timeout=TIMEOUT_S).json()["refserver_faults"] == []


@pytest.mark.parametrize(("bias", "message"), [({"99999": 1.0}, "logit_bias must has keys in [0, 8127], got 99999."),
                                               ({"a": 1.0}, "logit_bias keys must be token ids, got 'a'.")])
def test_a_bad_logit_bias_is_one_400_line(http, urls, bias, message):
    response = http.post(f"{urls['fix']}/generate", json={"text": "Hi", "sampling_params": {"logit_bias": bias}}, timeout=TIMEOUT_S)
    assert response.status_code == 400 and response.json()["error"]["message"] == message
