"""Count string-key reads in the source: subscripts with a string constant (reads only, not
stores) and ``.get("...")`` calls, per group of packages. Usage:
``python tools/count_string_key_reads.py [ROOT] [--list]``.

The counts measure how much of the code digs through dicts by key instead of reading typed fields.
Modules that parse what a server (or a child process) sends are counted apart: reading a wire
format's keys is their job, and each one turns the wire's JSON into typed values for the rest.
``--list`` prints every remaining read outside wire parsing, by file and line.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

# Group -> (folders counted, folders left out). The harness and the suites with their plugin; the renderers apart.
# The reference server, the kernel loader and the fixtures are not counted: they parse their own inputs.
GROUPS = {
    "harness+suites": (("specsuite", "suites"), ("specsuite/reports", "specsuite/refserver", "specsuite/kernel_loading", "specsuite/fixtures")),
    "reports": (("specsuite/reports",), ()),
}

# Modules whose job is parsing a wire format: JSON bodies and streams from SGLang, vLLM or the
# OpenAI API, the server's /server_info and /get_model_info, and the kernel child's JSON lines.
WIRE_PARSING_MODULES = (
    "specsuite/server/openai_client.py",
    "specsuite/server/kinds/sglang/client.py",
    "specsuite/server/kinds/vllm/client.py",
    "specsuite/server/transport.py",
    "specsuite/server/identity.py",
    "specsuite/server/served_dtype.py",
    "specsuite/server/faults.py",
    "specsuite/server/generation.py",
    "specsuite/server/answer_shapes.py",
    "specsuite/server/bench/formats.py",
    "specsuite/server/bench_answers.py",  # /server_info, /get_model_info and /v1/models as the workloads read them
    "specsuite/server/meta_info.py",  # a native /generate answer's meta_info and finish_reason objects
    "specsuite/server/vocab.py",
    "specsuite/server/kinds/sglang/kind.py",
    "specsuite/server/kinds/vllm/kind.py",
    "specsuite/server/kinds/sglang/bench_stream.py",
    "specsuite/server/kinds/vllm/bench_stream.py",
    "specsuite/server/kinds/vllm/wire.py",
    "specsuite/server/kinds/vllm/native_adapter.py",
    "specsuite/server/native_answers.py",
    "specsuite/families/integrity/openai_rules.py",
    "specsuite/server/kinds/sglang/integrity_rules.py",
    "specsuite/server/kinds/vllm/integrity_rules.py",
    "specsuite/families/integrity/native_answer.py",
    "specsuite/server/bench/streams.py",
    "specsuite/kernels/vllm_child.py",
    "specsuite/kernels/child_messages.py",  # the vLLM sampler child's protocol lines, read by the parent
)


def string_key_read_lines(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) \
                and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            lines.append(node.lineno)
    return sorted(lines)


def string_key_reads(tree: ast.AST) -> int:
    return len(string_key_read_lines(tree))


def main(root: Path, list_reads: bool) -> None:
    wire = {root / module for module in WIRE_PARSING_MODULES}
    wire_total = 0
    for group, (folders, left_out) in GROUPS.items():
        total = 0
        skipped = [root / folder for folder in left_out]
        paths = (path for folder in folders for path in (root / folder).rglob("*.py"))
        for path in sorted(path for path in paths if not any(path.is_relative_to(folder) for folder in skipped)):
            lines = string_key_read_lines(ast.parse(path.read_text()))
            if path in wire:
                wire_total += len(lines)
                continue
            total += len(lines)
            if list_reads and lines:
                print(f"  {path.relative_to(root)}: {len(lines)} (lines {', '.join(map(str, lines))})")
        print(f"{group} outside wire parsing: {total}")
    print(f"wire parsing ({len(wire)} modules): {wire_total}")


if __name__ == "__main__":
    arguments = [argument for argument in sys.argv[1:] if argument != "--list"]
    main(Path(arguments[0]) if arguments else Path(__file__).resolve().parent.parent, "--list" in sys.argv[1:])
