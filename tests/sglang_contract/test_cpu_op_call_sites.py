"""The project's sgl_kernel CPU ops (specsuite/fixtures/sglang_cpu_ops/registry.py) take exactly the arguments
that each served SGLang release passes at its call sites.

The call sites below were read in the releases' wheels; each is checked in the wheel itself (the
call at that file and line names the op and passes as many arguments as our schema declares), so a
release that moves or changes a call fails here before a server would die on it. The attention ops
are reached through the backend's `self.extend_attention_fwd` / `self.decode_attention_fwd`
(bound to torch.ops.sgl_kernel.* in IntelAMXAttnBackend.__init__) and `self.build_draft_decode_metadata`.
"""

from __future__ import annotations

import ast

import pytest

from specsuite.errors import SpecsuiteError
from specsuite.kernel_loading.sglang_wheel import extract_members

pytest.importorskip("torch")

from specsuite.fixtures.sglang_cpu_ops.registry import OPS, SERVED_RELEASES  # noqa: E402

BACKEND_ALIASES = {"extend_attention_fwd": "extend_attention_cpu", "decode_attention_fwd": "decode_attention_cpu",
                   "build_draft_decode_metadata": "build_draft_decode_metadata_cpu"}

# release -> (file under sglang/, line, op)
CALL_SITES: dict[str, list[tuple[str, int, str]]] = {
    "0.5.20": [
        ("srt/distributed/bootstrap.py", 231, "init_cpu_threads_env"),
        ("srt/distributed/bootstrap.py", 242, "initialize"),
        ("kernels/ops/kvcache/cache_move.py", 106, "copy_all_layer_kv_cache_cpu"),
        ("srt/layers/layernorm.py", 855, "fused_add_rmsnorm_cpu"),
        ("srt/layers/layernorm.py", 859, "rmsnorm_cpu"),
        ("srt/layers/rotary_embedding/base.py", 360, "rotary_embedding_cpu"),
        ("srt/mem_cache/memory_pool.py", 175, "store_cache_cpu"),
        ("srt/layers/activation.py", 161, "silu_and_mul_cpu"),
        ("srt/layers/attention/intel_amx_backend.py", 242, "extend_attention_cpu"),
        ("srt/layers/attention/intel_amx_backend.py", 328, "decode_attention_cpu"),
        ("srt/layers/attention/intel_amx_backend.py", 407, "build_draft_decode_metadata_cpu"),
        ("srt/mem_cache/allocation.py", 697, "assign_req_to_token_pool_cpu"),
        ("srt/speculative/eagle_worker_common.py", 234, "assign_draft_cache_locs_contiguous_cpu"),
        ("srt/speculative/spec_utils.py", 739, "assign_extend_cache_locs_cpu"),
        ("kernels/ops/speculative/cache_locs.py", 532, "assign_extend_cache_locs_cpu"),
        ("srt/speculative/eagle_utils.py", 256, "build_tree_kernel_efficient_cpu"),
        ("srt/speculative/eagle_utils.py", 404, "verify_tree_greedy_cpu"),
        ("kernels/ops/speculative/eagle.py", 40, "fill_bonus_tokens_cpu"),
        ("kernels/ops/speculative/eagle.py", 80, "fill_accept_out_cache_loc_cpu"),
        ("srt/layers/amx_utils.py", 79, "convert_weight_packed"),
        ("srt/layers/quantization/unquant.py", 470, "weight_packed_linear"),
    ],
    "0.5.23": [
        ("srt/distributed/bootstrap.py", 285, "init_cpu_threads_env"),
        ("srt/distributed/bootstrap.py", 296, "initialize"),
        ("kernels/ops/kvcache/cache_move.py", 191, "copy_all_layer_kv_cache_cpu"),
        ("srt/layers/layernorm.py", 890, "fused_add_rmsnorm_cpu"),
        ("srt/layers/layernorm.py", 894, "rmsnorm_cpu"),
        ("srt/layers/rotary_embedding/base.py", 440, "rotary_embedding_cpu"),
        ("srt/mem_cache/memory_pool.py", 199, "store_cache_cpu"),
        ("srt/layers/activation.py", 161, "silu_and_mul_cpu"),
        ("srt/layers/attention/intel_amx_backend.py", 290, "extend_attention_cpu"),
        ("srt/layers/attention/intel_amx_backend.py", 383, "decode_attention_cpu"),
        ("srt/layers/attention/intel_amx_backend.py", 462, "build_draft_decode_metadata_cpu"),
        ("srt/mem_cache/allocation.py", 746, "assign_req_to_token_pool_cpu"),
        ("kernels/ops/speculative/cache_locs.py", 99, "assign_draft_cache_locs_contiguous_cpu"),
        ("kernels/ops/speculative/cache_locs.py", 740, "assign_extend_cache_locs_cpu"),
        ("kernels/ops/speculative/cache_locs.py", 763, "assign_extend_cache_locs_cpu"),
        ("kernels/ops/speculative/spec_tree.py", 412, "build_tree_kernel_efficient_cpu"),
        ("kernels/ops/speculative/spec_tree.py", 510, "verify_tree_greedy_cpu"),
        ("kernels/ops/speculative/eagle.py", 40, "fill_bonus_tokens_cpu"),
        ("kernels/ops/speculative/eagle.py", 80, "fill_accept_out_cache_loc_cpu"),
        ("srt/layers/amx_utils.py", 79, "convert_weight_packed"),
        ("srt/layers/quantization/unquant.py", 582, "weight_packed_linear"),
    ],
}


def sglang_op_calls(source: str) -> dict[int, tuple[str, int, list[str]]]:
    """line -> (op name, argument count, keyword names) for every sgl_kernel call in a file."""
    tree = ast.parse(source)
    imported = {alias.asname or alias.name: alias.name for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module == "sgl_kernel" for alias in node.names}
    calls = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func, name = node.func, None
        if isinstance(func, ast.Attribute) and ast.unparse(func.value) == "torch.ops.sgl_kernel":
            name = func.attr
        elif isinstance(func, ast.Name) and func.id in imported:
            name = imported[func.id]
        elif isinstance(func, ast.Attribute) and ast.unparse(func.value) == "self" and func.attr in BACKEND_ALIASES:
            name = BACKEND_ALIASES[func.attr]
        if name:
            calls[node.lineno] = (name, len(node.args) + len(node.keywords), [k.arg for k in node.keywords])
    return calls


def test_every_served_release_has_its_call_sites_listed():
    assert set(CALL_SITES) == set(SERVED_RELEASES)


@pytest.mark.parametrize("release", SERVED_RELEASES)
def test_each_call_site_passes_what_our_schema_takes(release):
    files = sorted({path for path, _, _ in CALL_SITES[release]})
    try:
        extracted = extract_members(release, [f"sglang/{path}" for path in files])
    except SpecsuiteError as exc:
        pytest.skip(f"SGLang {release} source unavailable: {exc}")
    schemas = {op.name: op for op in OPS}
    problems = []
    for path, line, op_name in CALL_SITES[release]:
        calls = sglang_op_calls(extracted[f"sglang/{path}"].path.read_text(encoding="utf-8"))
        if line not in calls or calls[line][0] != op_name:
            problems.append(f"{path}:{line}: no call of {op_name} there (found {calls.get(line)})")
            continue
        _, count, keywords = calls[line]
        if count != schemas[op_name].argument_count:
            problems.append(f"{path}:{line}: {op_name} passes {count} arguments, our schema takes {schemas[op_name].argument_count}")
        schema_names = schemas[op_name].schema
        problems += [f"{path}:{line}: {op_name} passes keyword {k!r} that our schema lacks" for k in keywords if f" {k}" not in schema_names]
    assert problems == []


def test_the_call_finder_sees_all_three_ways_of_reaching_an_op():
    source = ("import torch\nfrom sgl_kernel import verify_tree_greedy_cpu as v\n"
              "torch.ops.sgl_kernel.rmsnorm_cpu(a, b, c)\nv(predicts=1, accept_index=2)\nself.decode_attention_fwd(*range(19))\n")
    calls = sglang_op_calls(source)
    assert calls[3][:2] == ("rmsnorm_cpu", 3)
    assert calls[4] == ("verify_tree_greedy_cpu", 2, ["predicts", "accept_index"])
    assert calls[5][0] == "decode_attention_cpu"
