"""Contract: where SGLang 0.5.23 reports the dtype it serves in, read from its source. The greedy
comparisons' near-tie tolerance (specsuite/families/lossless/greedy.py) follows it
(specsuite/server/served_dtype.py)."""

from __future__ import annotations

import ast
import re

from specsuite.server.served_dtype import normalise, served_dtype


def test_server_info_echoes_the_resolved_dtype_field(sglang_source) -> None:
    """entrypoints/http_server.py:863-889: /server_info is `build_server_info(server_args, ...)`, which
    starts from `server_args.resolved_dict()` (utils/common.py:3584-3593): every ServerArgs field by
    name, `dtype` among them."""
    http = sglang_source("srt/entrypoints/http_server.py")
    route = http[http.index('@app.get("/server_info")'):]
    assert "**build_server_info(server_args, _global_state.scheduler_info)" in route[:2000]
    common = sglang_source("srt/utils/common.py")
    body = common[common.index("def build_server_info("):]
    assert "result = server_args.resolved_dict()" in body[:600]


def test_dtype_field_choices_all_read(sglang_source) -> None:
    """arg_groups/fields/model.py:160-176: `dtype`, default "auto", choices auto, half, float16,
    bfloat16, float, float32; each but auto names a type the tolerance table knows."""
    model = sglang_source("srt/arg_groups/fields/model.py")
    field = model[model.index("    dtype: A["):model.index("    quantization: A[")]
    choices = ast.literal_eval(re.search(r"choices=(\[[^\]]*\])", field).group(1))
    assert choices == ["auto", "half", "float16", "bfloat16", "float", "float32"]
    assert field.rstrip().endswith('= "auto"')
    assert [c for c in choices if normalise(c) is None] == ["auto"]


def test_auto_serves_float32_models_in_float16(sglang_source) -> None:
    """configs/model_config.py:2284-2321 `_get_and_verify_dtype`: with "auto", a float32 (or untyped)
    model is served in float16, a Gemma one in bfloat16, any other in its config's type."""
    config = sglang_source("srt/configs/model_config.py")
    body = config[config.index("def _get_and_verify_dtype("):]
    body = body[:body.index("\ndef ")]
    assert 'config.get("dtype", None) or config.get("torch_dtype", None)' in body
    assert re.search(r'if config_dtype is None:\s+config_dtype = torch\.float32', body)
    auto = body[body.index('if dtype == "auto":'):body.index("else:\n            if dtype not in")]
    assert "torch_dtype = torch.bfloat16" in auto and "torch_dtype = torch.float16" in auto and "torch_dtype = config_dtype" in auto
    assert served_dtype({"dtype": "auto"}, {"torch_dtype": "float32"}).name == "float16"
    assert served_dtype({"dtype": "auto"}, {"torch_dtype": "float32", "model_type": "gemma3"}).name == "bfloat16"
