"""A run's configuration, read from its arm's typed identity, keeps every key the server wrote: the speculative
settings whole (unknown keys and nulls included) and the named server args, so a configuration's key does not move
when the identity is read typed."""

from __future__ import annotations

from specsuite.history.runs import CONFIG_SERVER_ARGS, config_from_identity, config_key
from specsuite.results.types import ArmIdentity

IDENTITY = {
    "base_url": "http://node:30000", "model_path": "/models/glm", "served_model_name": None, "version": "0.5.23",
    "tokenizer_length": 154856, "vocab_size": 154880, "cuda_graph": {"max_bs": 8},
    "speculative": {"speculative_num_steps": 3, "speculative_algorithm": "EAGLE", "speculative_eagle_topk": None,
                    "speculative_accept_threshold_single": 1.0},
    "server_args": {"dtype": "bfloat16", "tp_size": 8, "refserver_sampler": "not an object", "chunked_prefill_size": 8192},
}


def test_the_configuration_keeps_every_speculative_key_and_the_named_server_args():
    config = config_from_identity(ArmIdentity.from_dict(IDENTITY), profile="nightly", accelerator="MI355X")
    assert config["speculative"] == dict(sorted(IDENTITY["speculative"].items()))
    assert list(config["speculative"]) == sorted(IDENTITY["speculative"])
    assert config["server_args"] == {name: IDENTITY["server_args"].get(name) for name in CONFIG_SERVER_ARGS}
    assert config["model"] == "/models/glm" and config["cuda_graph"] == {"max_bs": 8}


def test_the_key_is_the_same_whether_the_identity_is_read_typed_or_not():
    typed = config_from_identity(ArmIdentity.from_dict(IDENTITY), profile=None, accelerator=None)
    plain = {
        "model": IDENTITY["model_path"], "tokenizer_length": 154856, "vocab_size": 154880,
        "speculative": dict(sorted(IDENTITY["speculative"].items())), "cuda_graph": {"max_bs": 8},
        "server_args": {name: IDENTITY["server_args"].get(name) for name in CONFIG_SERVER_ARGS}, "profile": None, "accelerator": None,
    }
    assert config_key(typed) == config_key(plain)


def test_a_reference_identity_is_told_by_its_marker():
    assert not ArmIdentity.from_dict(IDENTITY).is_reference()
    assert ArmIdentity.from_dict({**IDENTITY, "server_args": {"refserver_arm": "fix"}}).is_reference()
    assert ArmIdentity.from_dict({"server_args": "not an object"}).server_args is None
