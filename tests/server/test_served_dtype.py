"""The served dtype (specsuite/server/served_dtype.py) from /server_info and config.json, and the
identity that carries it; the near-tie tolerance each gives (specsuite/families/lossless/greedy.py)."""

from __future__ import annotations

import json

import pytest

from specsuite.families.lossless.greedy import near_tie_of, near_tie_rule
from specsuite.refserver.cli import build_parser, server_args_dict
from specsuite.refserver.engine import EngineConfig
from specsuite.server.identity import ServerIdentity
from specsuite.server.served_dtype import LOGITS_TYPE_RULE, coarser, normalise, read_model_config, served_dtype


@pytest.mark.parametrize(("reported", "name"), [("float16", "float16"), ("half", "float16"), ("bfloat16", "bfloat16"),
                                                ("float", "float32"), ("float32", "float32"), ("torch.bfloat16", "bfloat16")])
def test_sglang_dtype_choices(reported, name):
    """SGLang's --dtype choices (arg_groups/fields/model.py:160-176) as /server_info echoes them."""
    found = served_dtype({"dtype": reported})
    assert found.name == name and found.source == f"/server_info dtype {reported}"


@pytest.mark.parametrize(("config", "name"), [({"torch_dtype": "bfloat16"}, "bfloat16"), ({"torch_dtype": "float16"}, "float16"),
                                              ({"torch_dtype": "float32"}, "float16"), ({}, "float16"),
                                              ({"torch_dtype": "float32", "model_type": "gemma2"}, "bfloat16"),
                                              ({"dtype": "bfloat16"}, "bfloat16")])
def test_auto_follows_sglangs_rule_on_config_json(config, name):
    """dtype "auto": configs/model_config.py:2284-2321 serves a float32 or untyped model in float16
    (Gemma's in bfloat16), any other in its own type."""
    assert served_dtype({"dtype": "auto"}, config).name == name


def test_vllm_takes_config_json_and_assumes_bfloat16_for_float32_models():
    """vLLM says no dtype over HTTP outside its dev mode; its auto picks the platform's type for float32 models."""
    assert served_dtype({"server_kind": "vllm"}, {"torch_dtype": "float16"}).name == "float16"
    found = served_dtype({"server_kind": "vllm"}, {"torch_dtype": "float32"})
    assert found.name == "bfloat16" and "vLLM" in found.source


def test_nothing_known_assumes_bfloat16():
    found = served_dtype({})
    assert found.name == "bfloat16" and "assumed" in found.source


@pytest.mark.parametrize(("info", "name"), [({"dtype": "float32", "enable_tf32_matmul": True}, "tf32"),
                                            ({"dtype": "bfloat16", "kv_cache_dtype": "auto", "quantization": None}, "bfloat16"),
                                            ({"dtype": "float16", "quantization": "awq"}, "float16")])
def test_tf32_makes_it_coarser(info, name):
    assert served_dtype(info).name == name


@pytest.mark.parametrize("info", [{"dtype": "bfloat16", "kv_cache_dtype": "fp8_e4m3"}, {"dtype": "bfloat16", "kv_cache_dtype": "fp8_e5m2"},
                                  {"dtype": "bfloat16", "quantization": "fp8"},
                                  {"dtype": "bfloat16", "quantization": "fp8", "kv_cache_dtype": "fp8_e4m3"}])
def test_fp8_kv_cache_and_fp8_weights_keep_the_model_type_of_the_logits(info):
    """The logits are rounded in the model's type, whatever the KV cache or the weights are stored in: SGLang 0.5.23
    computes them as hidden_states.to(lm_head.weight.dtype) @ lm_head.weight.T (layers/logits_processor.py:1198-1201), its
    LM head unquantized under fp8 (layers/quantization/fp8.py:389-476 returns None for it; vocab_parallel_embedding.py:
    305-306), an fp8 KV cache stored as uint8 and attended in the model's type (mem_cache/memory_pool.py:2029-2031). The
    nightly's --kv-cache-dtype fp8_e4m3 therefore keeps bfloat16's tolerance (0.25 nats), not fp8's 4 nats."""
    found = served_dtype(info)
    print(f"rule: {LOGITS_TYPE_RULE}; read: {found.name} from {found.source}")
    assert found.name == "bfloat16"
    assert "not the logits' type" in found.source and "logits_processor.py:1198-1201" in found.source
    assert near_tie_of([found]).tolerance == 0.25


def test_normalise_and_coarser():
    assert normalise("auto") is None and normalise(None) is None
    assert coarser("float32", "bfloat16") == "bfloat16" and coarser("float16", "bfloat16") == "bfloat16"


def test_read_model_config_skips_missing_folders(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"torch_dtype": "bfloat16"}))
    assert read_model_config(None, tmp_path / "missing", tmp_path) == {"torch_dtype": "bfloat16"}
    assert read_model_config(tmp_path / "missing") is None


def test_identity_carries_the_dtype(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"torch_dtype": "bfloat16"}))
    explicit = ServerIdentity.from_server("http://h:1", {"model_path": str(tmp_path)}, {"dtype": "float16"})
    assert (explicit.dtype, explicit.dtype_source) == ("float16", "/server_info dtype float16")
    auto = ServerIdentity.from_server("http://h:1", {"model_path": str(tmp_path)}, {"dtype": "auto"})
    assert auto.dtype == "bfloat16" and auto.to_dict()["dtype"] == "bfloat16"
    assert auto.served_dtype is not None and auto.served_dtype.name == "bfloat16"


def test_reference_server_reports_float32_so_the_tolerance_stays_tight():
    """The embedded reference server's /server_info (specsuite/refserver/cli.py server_args_dict) says float32."""
    args = build_parser().parse_args(["--port", "1"])  # every option at its default, as a launched server has them
    info = server_args_dict(args, EngineConfig(), "/m", 1024)
    rule = near_tie_of([served_dtype(info)])
    assert info["dtype"] == "float32" and rule.dtype == "float32" and rule.tolerance == near_tie_rule("float32").tolerance == 1e-3
