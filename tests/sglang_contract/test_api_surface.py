"""SGLang 0.5.23's /generate surface, read from its own source: the sampling_params keys, the
defaults the harness relies on, the meta_info keys it parses, and the streaming mode it assumes.

If SGLang changes any of these, these tests say so; the reference server and the harness are
held to the same facts here rather than to our copy of them.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from specsuite.families.integrity.openai_rules import COMPLETIONS_DEFAULT_MAX_TOKENS, native_params
from specsuite.refserver import protocol
from specsuite.server.integrity_rules import IntegrityContext
from specsuite.server.kinds.sglang.integrity_rules import SGLANG_DEFAULT_MAX_NEW_TOKENS
from specsuite.server.native_answers import stream_finals

ROOT = Path(__file__).resolve().parents[2]


def _tuple_assignment(source: str, name: str) -> tuple[str, ...]:
    """The value of a module-level `name = ("a", "b", ...)`."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    raise AssertionError(f"{name} not found")


def _class_fields(source: str, class_name: str, stop_comment: str | None = None) -> dict[str, ast.expr | None]:
    """Annotated fields of a class body with their default expressions, in order; with
    `stop_comment`, only those above the line holding that comment."""
    tree = ast.parse(source)
    lines = source.splitlines()
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == class_name)
    stop_line = None
    if stop_comment is not None:
        stop_line = next(i + 1 for i in range(cls.lineno, len(lines)) if stop_comment in lines[i])
    fields: dict[str, ast.expr | None] = {}
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if stop_line is not None and node.lineno > stop_line:
                break
            fields[node.target.id] = node.value
    return fields


def contract_sampling_keys(sglang_source) -> tuple[str, ...]:
    return _tuple_assignment(sglang_source("api/v1/api_types.py"), "_FIELDS_SamplingParams")


def test_refserver_accepts_exactly_the_contract_sampling_keys(sglang_source):
    """The strict gate admits exactly `_FIELDS_SamplingParams` (api/v1/api_types.py:1256) and
    answers any other key 400 (api_types.py:1319-1320). The reference server must accept the same
    set, or it raises false alarms (too few) or lets the harness send keys SGLang refuses (too
    many); the harness's payloads are checked against it by every suite run."""
    assert set(protocol.SAMPLING_PARAM_KEYS) == set(contract_sampling_keys(sglang_source))


def test_every_contract_key_takes_null_and_so_does_the_refserver(sglang_source):
    """decode_SamplingParams maps an explicit null to the default for every key, and passes
    custom_params through whatever it is (api/v1/api_types.py:1259-1321)."""
    source = sglang_source("api/v1/api_types.py")
    body = source[source.index("def decode_SamplingParams"):source.index("def encode_SamplingParams")]
    for key in contract_sampling_keys(sglang_source):
        branch = re.search(rf'elif key == "{key}":\n\s+kw\["{key}"\] = (.+)|if key == "{key}":\n\s+kw\["{key}"\] = (.+)', body)
        assert branch, key
        decoded = branch.group(1) or branch.group(2)
        assert "if x is None" in decoded or decoded.strip() == "x", (key, decoded)
        assert protocol._json_kind_matches(None, "null") and any(
            protocol._json_kind_matches(None, kind) for kind in protocol._SAMPLING_TYPES[key]), key


def test_choice_is_a_contract_key_but_no_sampling_params_field(sglang_source):
    """`choice` passes the gate (api_types.py:1256) but SamplingParams has no such field
    (srt/sampling/sampling_params.py:140-181, the API parameters), so SamplingParams(**kwargs)
    raises TypeError (srt/managers/tokenizer_manager.py:1565): the reference server's 500 for it
    rests on this. Every other contract key is a field."""
    api_fields = _class_fields(sglang_source("srt/sampling/sampling_params.py"), "SamplingParams", "# --- Internal fields")
    assert set(contract_sampling_keys(sglang_source)) - set(api_fields) == {"choice"}
    assert "choice" in contract_sampling_keys(sglang_source)


def test_default_max_new_tokens_is_what_the_harness_assumes(sglang_source):
    """/generate's default budget is SamplingParams.max_new_tokens = 128
    (srt/sampling/sampling_params.py:149); /v1/completions' is CompletionRequest.max_tokens = 16
    (srt/entrypoints/openai/protocol.py:378)."""
    fields = _class_fields(sglang_source("srt/sampling/sampling_params.py"), "SamplingParams")
    assert ast.literal_eval(fields["max_new_tokens"]) == SGLANG_DEFAULT_MAX_NEW_TOKENS
    completion = _class_fields(sglang_source("srt/entrypoints/openai/protocol.py"), "CompletionRequest")
    assert ast.literal_eval(completion["max_tokens"]) == COMPLETIONS_DEFAULT_MAX_TOKENS
    assert native_params("completions", {})["max_new_tokens"] == 16


def test_openai_bodies_map_to_contract_sampling_keys(sglang_source):
    """What the OpenAI integrity rules treat as sampling params are contract keys
    (api/v1/api_types.py:1256)."""
    body = {"max_tokens": 3, "stop": ["x"], "stop_token_ids": [1], "ignore_eos": True, "min_tokens": 1,
            "no_stop_trim": True, "skip_special_tokens": False, "stop_regex": "y"}
    assert set(native_params("completions", body)) <= set(contract_sampling_keys(sglang_source))


# --------------------------------------------------------------------------- streaming mode
def test_incremental_streaming_output_defaults_off_and_the_harness_assumes_cumulative(sglang_source):
    """`incremental_streaming_output` defaults to False (srt/arg_groups/fields/serving.py:274-277):
    native streams are cumulative unless the server says otherwise in /server_info. The harness
    reads that flag under the same field name (specsuite/server/identity.py: ServerIdentity, read by the integrity wiring),
    its context defaults to cumulative, and the reference server reports the default."""
    fields = _class_fields(sglang_source("srt/arg_groups/fields/serving.py"), next(
        node.name for node in ast.walk(ast.parse(sglang_source("srt/arg_groups/fields/serving.py")))
        if isinstance(node, ast.ClassDef)
        and any(isinstance(s, ast.AnnAssign) and getattr(s.target, "id", None) == "incremental_streaming_output" for s in node.body)))
    default = ast.literal_eval(fields["incremental_streaming_output"])
    assert default is False
    assert IntegrityContext().incremental_streaming is default
    assert '"incremental_streaming_output"' in (ROOT / "specsuite/server/identity.py").read_text()
    refserver_args = ast.parse((ROOT / "specsuite/refserver/cli.py").read_text())
    reported = [node.values[i] for node in ast.walk(refserver_args) if isinstance(node, ast.Dict)
                for i, k in enumerate(node.keys) if isinstance(k, ast.Constant) and k.value == "incremental_streaming_output"]
    assert [ast.literal_eval(v) for v in reported] == [default]


def test_incremental_reassembly_joins_every_sliced_key_the_harness_reads(sglang_source):
    """Under --incremental-streaming-output the tokenizer slices the keys in
    `_INCREMENTAL_STREAMING_META_INFO_KEYS` to the new positions (srt/managers/
    tokenizer_manager.py:258-264). Of those, every one the harness parses must be joined across
    chunks by its stream reassembly, or an incremental stream loses entries."""
    sliced = _tuple_assignment(sglang_source("srt/managers/tokenizer_manager.py"), "_INCREMENTAL_STREAMING_META_INFO_KEYS")
    read = harness_meta_keys()
    for key in sorted(set(sliced) & read):
        chunks = [{"text": "a", "output_ids": [1], "meta_info": {key: [[-0.1, 1, None]], "finish_reason": None}},
                  {"text": "b", "output_ids": [2], "meta_info": {key: [[-0.2, 2, None]], "finish_reason": {"type": "length", "length": 2}}}]
        [final] = stream_finals({"text": "p", "sampling_params": {}}, chunks, incremental=True)
        assert final["meta_info"][key] == [[-0.1, 1, None], [-0.2, 2, None]], key
    assert "output_token_logprobs" in set(sliced) & read  # the join is exercised at least once


# --------------------------------------------------------------------------- meta_info keys
META_READ = re.compile(r"""meta(?:_info)?(?:\.get\(|\[)["']([a-z_]+)["']""")


# specsuite's parts that are not the harness: the reference server writes meta_info keys of its own.
NOT_THE_HARNESS = ("refserver", "kernel_loading", "reports", "fixtures", "pytest_plugin")


def harness_meta_keys() -> set[str]:
    """Every meta_info key the harness reads (`meta.get("k")`, `meta_info["k"]`, ...), plus the
    fields faults.py requires."""
    keys: set[str] = set()
    package = ROOT / "specsuite"
    for path in package.rglob("*.py"):
        if path.relative_to(package).parts[0] not in NOT_THE_HARNESS:
            keys |= set(META_READ.findall(path.read_text()))
    from specsuite.server.faults import REQUIRED_META_FIELDS

    return keys | set(REQUIRED_META_FIELDS)


def test_meta_info_keys_the_harness_parses_exist_in_sglang(sglang_source):
    """Each meta_info key the harness reads is one SGLang 0.5.23 sets: in _handle_batch_output
    (srt/managers/tokenizer_manager.py:2505-2560), add_logprob_to_meta_info (2868-2973),
    _calculate_spec_decoding_metrics (3150-3199) and the finished-output path (3600-3630). A
    key that does not exist would make a check silently skip or a parse fail on a real server."""
    source = sglang_source("srt/managers/tokenizer_manager.py")
    keys = harness_meta_keys()
    assert {"finish_reason", "completion_tokens", "spec_verify_ct", "output_token_logprobs"} <= keys  # the scan works
    missing = sorted(k for k in keys if not re.search(rf'meta_info\["{k}"\]\s*=|"{k}":', source))
    assert missing == []


def test_harness_payloads_send_only_contract_sampling_keys(sglang_source):
    """Every /generate body the harness builds carries only `sampling_params` keys the strict gate
    admits (api/v1/api_types.py:1256, 1319-1320): one more would be a 400 on a real server."""
    from specsuite.families.bench.client import RequestSettings
    from specsuite.families.bench.datasets import DatasetRow
    from specsuite.families.correctness.prompts import PromptItem
    from specsuite.families.correctness.workload import SamplingCase
    from specsuite.families.correctness.workload import build_request as correctness_request
    from specsuite.families.gsm8k.prompt import build_request as gsm8k_request
    from specsuite.families.lossless.scoring import scoring_request
    from specsuite.pytest_plugin.integrity import greedy_payload
    from specsuite.server.protocol import native_payload

    bench_settings = RequestSettings("sglang", "http://127.0.0.1:1", top_p=0.9)
    payloads = [
        native_payload(gsm8k_request("Q: 1+1?\nA:")),
        native_payload(correctness_request(PromptItem("p0", "prose", "Hello"), SamplingCase(1.0, 0.95), 32, 7)),
        native_payload(scoring_request([1, 2], [3], 2)),
        bench_settings.wire.body(bench_settings.bench_request(DatasetRow("Hello", 1, 8))),
        greedy_payload("Hello", 8, stop=["x"], stop_token_ids=[1], no_stop_trim=True, ignore_eos=True, min_new_tokens=1),
    ]
    keys = set(contract_sampling_keys(sglang_source))
    sent = {key for payload in payloads for key in payload["sampling_params"]}
    assert sent and sent <= keys, sorted(sent - keys)
