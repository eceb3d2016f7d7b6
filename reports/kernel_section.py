"""The report's kernel section: which sampler was tested on which device, every invariant per
input class (with one example row where it broke), and the distribution family's p-values.
Reads only the results dict's "kernel" entry, written by the kernel suite."""

from __future__ import annotations

from typing import Any

from reports.blocks import Document, Table, fmt, fmt_p

KERNEL_KEY = "kernel"


def _example(example: dict[str, Any] | None) -> str:
    if not example:
        return ""
    keys = ("row", "accepted", "emitted", "draft_step", "q(X)", "p(X)", "fallback_id", "p(fallback_id)", "tokenizer_vocab",
            "position", "id", "target_probability", "temperature", "top_p", "expected_accepted", "expected_emitted", "rerun",
            "rerun_emitted")
    return ", ".join(f"{key} {example[key]}" for key in keys if key in example)


def _observed(test: dict[str, Any]) -> str:
    if "observed_rate" in test:
        return fmt(test.get("observed_rate"))
    if "mean_difference" in test:
        interval = test.get("difference_ci95")
        return f"{fmt(test['mean_difference'])} [{fmt(interval[0])}, {fmt(interval[1])}]" if interval else fmt(test["mean_difference"])
    for key in ("x2", "chi2"):
        if test.get(key) is not None:
            return f"X2 {fmt(test[key])}"
    return "–"


def _expected(test: dict[str, Any]) -> str:
    if "expected_rate" in test:
        return fmt(test.get("expected_rate"))
    if "mean_difference" in test:
        return ">= 0 (block - token)"
    return f"{test.get('categories', '–')} cells"


def add_kernel_section(doc: Document, results: dict[str, Any]) -> None:
    """Append the section when the results hold a kernel-suite run; nothing otherwise."""
    kernel = results.get(KERNEL_KEY)
    if not isinstance(kernel, dict):
        return
    doc.heading(2, "Kernel suite")
    shape = kernel.get("shape") or {}
    sha = kernel.get("sha256") or "no file (the reference numpy sampler)"
    doc.bullets([
        f"sampler **{kernel.get('label', '?')}** (`--kernel {kernel.get('kernel', '?')}`), sha256 `{sha}`",
        f"device: {kernel.get('device', '?')}; engine {kernel.get('engine', 'sglang')}, {kernel.get('verification', 'token')} verification",
        f"shapes: batch {shape.get('batch')}, draft steps {shape.get('steps')}, kernel vocab {shape.get('kernel_vocab')}, "
        f"tokenizer vocab {shape.get('tokenizer_vocab')}; seed {kernel.get('seed')}",
    ])
    by_class: dict[str, dict[str, dict[str, Any]]] = {}
    for outcome in kernel.get("invariants") or []:
        by_class.setdefault(outcome["input_class"], {})[outcome["invariant"]] = outcome
    invariants = list(kernel.get("rules") or {})
    rows = []
    examples = []
    for input_class, outcomes in by_class.items():
        cells = [input_class]
        for name in invariants:
            outcome = outcomes.get(name)
            if outcome is None:
                cells.append("–")
            elif outcome["passed"]:
                cells.append("pass")
            else:
                cells.append(f"**FAIL** {outcome['violations']}/{outcome['rows']}")
                examples.append(f"{name} [{input_class}]: {_example(outcome.get('example'))}")
        rows.append(cells)
    if rows:
        doc.table(Table(["input class", *invariants], rows))
        doc.bullets([f"{name}: {rule}" for name, rule in (kernel.get("rules") or {}).items()])
    doc.bullets(examples)
    family = kernel.get("distribution") or {}
    tests = family.get("tests") or []
    if tests:
        doc.paragraph(f"Distribution tests on well-formed input ({family.get('correction')} across {family.get('family_size')} tests, "
                      f"alpha {kernel.get('alpha')}; 'detectable' is the smallest deviation found with {fmt(family.get('power'))} "
                      "probability: a rate shift for acceptance, Cohen's w for the sequence tests, accepted drafts for the "
                      "block-versus-token length).")
        doc.table(Table(["test", "n", "observed", "expected", "p", "Holm p", "detectable", "verdict"], [[
            test["name"], str(test["n"]),
            _observed(test), _expected(test),
            fmt_p(test.get("p_value")), fmt_p(test.get("adjusted_p")), fmt(test.get("detectable_at_90_power")),
            "**fires**" if test.get("rejected") else (test.get("note") or "consistent"),
        ] for test in tests]))
