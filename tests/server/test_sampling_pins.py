"""A test's request leaves the server no sampling field to default (specsuite.server.sampling_pins): every field of every
server kind's list is sent, the test's own values win, and the model defaults that were overridden can be read back
from the model folder and from vLLM's development /server_info."""

from __future__ import annotations

import json
from typing import Any

import pytest

from specsuite.errors import SpecsuiteError
from specsuite.server import kinds
from specsuite.server.kinds.vllm.client import VLLMClient
from specsuite.server.protocol import Sampling
from specsuite.server.sampling_pins import NEUTRAL, model_generation_defaults, pinned, unpinned

VLLM_LIST = ("repetition_penalty", "presence_penalty", "frequency_penalty", "temperature", "top_k", "top_p", "min_p", "max_new_tokens")


@pytest.mark.parametrize("kind", kinds.all_kinds(), ids=lambda kind: kind.name)
def test_a_pinned_request_names_every_field_its_kind_could_default(kind):
    params = pinned(Sampling(temperature=0.7, max_new_tokens=16)).params()
    assert kind.model_sampling_defaults, f"{kind.name} lists no defaultable fields"
    assert unpinned(params, kind.model_sampling_defaults) == []
    # without the pins the penalties, top_k, min_p and top_p are the server's to fill
    assert unpinned(Sampling(temperature=0.7, max_new_tokens=16).params(), kind.model_sampling_defaults)


def test_vllms_list_is_the_one_its_generation_config_fills():
    """vLLM 0.32 get_diff_sampling_param (vllm/config/model.py:1869-1878)."""
    assert kinds.get("vllm").model_sampling_defaults == VLLM_LIST


def test_pins_keep_the_tests_values_and_fill_the_rest_with_neutral_ones():
    sampling = pinned(Sampling(temperature=1.0, top_p=0.9, max_new_tokens=8, seed=3, extra={"repetition_penalty": 1.1}))
    params = sampling.params()
    assert params["top_p"] == 0.9 and params["sampling_seed"] == 3 and params["repetition_penalty"] == 1.1
    assert (params["top_k"], params["min_p"], params["frequency_penalty"], params["presence_penalty"]) == (-1, 0.0, 0.0, 0.0)
    assert pinned(sampling) == sampling
    openai = sampling.openai_fields()  # the vLLM and OpenAI clients send the penalties under the same names
    assert {name: openai[name] for name in ("top_k", "min_p", "frequency_penalty", "presence_penalty", "repetition_penalty")} == {
        "top_k": -1, "min_p": 0.0, "frequency_penalty": 0.0, "presence_penalty": 0.0, "repetition_penalty": 1.1}
    assert set(NEUTRAL) <= set(params)


def test_a_request_without_temperature_or_budget_is_refused():
    with pytest.raises(SpecsuiteError, match="temperature and max_new_tokens"):
        pinned(Sampling(max_new_tokens=8))


def test_the_model_folders_generation_defaults_are_read_back(tmp_path):
    (tmp_path / "generation_config.json").write_text(json.dumps({"do_sample": True, "temperature": 0.7, "repetition_penalty": 1.05,
                                                                 "top_k": 20, "eos_token_id": 2}))
    assert model_generation_defaults([None, tmp_path / "missing", tmp_path], VLLM_LIST) == {
        "repetition_penalty": 1.05, "temperature": 0.7, "top_k": 20}
    assert model_generation_defaults([tmp_path / "missing"], VLLM_LIST) is None


class _Response:
    def __init__(self, status: int, body: Any) -> None:
        self.ok, self._body = status == 200, body

    def json(self) -> Any:
        return self._body

    def __enter__(self) -> _Response:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


@pytest.mark.parametrize(("status", "body", "facts"), [
    (200, {"vllm_env": {"VLLM_BATCH_INVARIANT": True}, "vllm_config": {"model_config": {"generation_config": "auto",
                                                                                        "override_generation_config": {}}}},
     {"batch_invariant": True, "generation_config": "auto", "override_generation_config": {}}),
    (200, {"vllm_env": {"VLLM_BATCH_INVARIANT": False}, "vllm_config": "text form"}, {"batch_invariant": False}),
    (404, {"detail": "Not Found"}, {}),  # served without VLLM_SERVER_DEV_MODE: nothing is known
])
def test_vllms_development_server_info_tells_batch_invariance_and_the_generation_config(status, body, facts):
    client = VLLMClient("http://h:1", model="m")
    asked = []
    client._http.request = lambda method, path, **kw: asked.append((path, kw.get("params"))) or _Response(status, body)
    assert client.dev_facts() == facts
    assert asked == [("/server_info", {"config_format": "json"})]
    assert kinds.get("vllm").batch_invariance(facts) is facts.get("batch_invariant")


def test_the_lossless_record_names_the_defaults_the_requests_overrode(tmp_path):
    """The model folder's values of the server kind's list, and the source the server names (vLLM: generation_config)."""
    from types import SimpleNamespace

    from specsuite.pytest_plugin.lossless import model_defaults_of

    (tmp_path / "generation_config.json").write_text(json.dumps({"repetition_penalty": 1.3, "temperature": 1.0, "eos_token_id": 2}))
    identity = SimpleNamespace(tokenizer_path=str(tmp_path), model_path=str(tmp_path), server_args={"generation_config": "auto"})
    server = SimpleNamespace(identity=identity, client=VLLMClient("http://h:1", model="m"))
    assert model_defaults_of(server) == {"repetition_penalty": 1.3, "temperature": 1.0, "source": "auto"}
    identity.server_args = {"sampling_defaults": "model"}
    server.client = SimpleNamespace()  # any other client is taken for SGLang, whose list has no presence penalty
    assert model_defaults_of(server) == {"repetition_penalty": 1.3, "temperature": 1.0, "source": "model"}
    identity.tokenizer_path = identity.model_path = str(tmp_path / "elsewhere")
    assert model_defaults_of(server) is None
