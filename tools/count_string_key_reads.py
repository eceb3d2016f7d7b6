"""Count string-key reads in the source: subscripts with a string constant (reads only, not
stores) and ``.get("...")`` calls, per group of packages. Usage: ``python tools/count_string_key_reads.py [ROOT]``.

The counts measure how much of the code digs through dicts by key instead of reading typed fields.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

GROUPS = {"harness+suites": ("harness", "suites"), "reports": ("reports",)}


def string_key_reads(tree: ast.AST) -> int:
    count = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) \
                and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            count += 1
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            count += 1
    return count


def main(root: Path) -> None:
    for group, packages in GROUPS.items():
        total = sum(string_key_reads(ast.parse(path.read_text())) for package in packages
                    for path in sorted((root / package).rglob("*.py")))
        print(f"{group}: {total}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
