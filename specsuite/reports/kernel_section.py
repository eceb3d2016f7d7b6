"""The report's kernel section: which sampler was tested on which device, every invariant per
input class (with one example row where it broke), and the distribution family's p-values.
Reads only the document's typed kernel section (specsuite.results.types.KernelSection), written by the kernel suite."""

from __future__ import annotations

from typing import Any

from specsuite.reports.blocks import Report, Table, fmt, fmt_p
from specsuite.reports.records import KernelShape
from specsuite.results.types import DistributionTest, KernelSection
from specsuite.results.types import Document as ResultsDocument

KERNEL_KEY = "kernel"
_EXAMPLE_KEYS = ("row", "accepted", "emitted", "draft_step", "q(X)", "p(X)", "fallback_id", "p(fallback_id)", "tokenizer_vocab",
                 "position", "id", "target_probability", "temperature", "top_p", "expected_accepted", "expected_emitted", "rerun",
                 "rerun_emitted")


def _example(example: dict[str, Any] | None) -> str:
    if not example:
        return ""
    return ", ".join(f"{key} {example[key]}" for key in _EXAMPLE_KEYS if key in example)


def _observed(test: DistributionTest) -> str:
    if test.has("observed_rate"):
        return fmt(test.observed_rate)
    if test.has("mean_difference"):
        interval = test.difference_ci95
        return f"{fmt(test.mean_difference)} [{fmt(interval[0])}, {fmt(interval[1])}]" if interval else fmt(test.mean_difference)
    for value in (test.x2, test.chi2):
        if value is not None:
            return f"X2 {fmt(value)}"
    return "–"


def _expected(test: DistributionTest) -> str:
    if test.has("expected_rate"):
        return fmt(test.expected_rate)
    if test.has("mean_difference"):
        return ">= 0 (block - token)"
    return f"{test.categories if test.has('categories') else '–'} cells"


def _or_unknown(kernel: KernelSection, name: str, unknown: str) -> Any:
    """A header field as written (None included), or `unknown` when the section does not have it."""
    return getattr(kernel, name) if kernel.has(name) else unknown


def add_kernel_section(doc: Report, results: ResultsDocument) -> None:
    """Append the section when the results hold a kernel-suite run; nothing otherwise."""
    kernel = results.kernel
    if kernel is None:
        return
    doc.heading(2, "Kernel suite")
    shape = KernelShape.from_dict(kernel.shape or {})
    sha = kernel.sha256 or "no file (the reference numpy sampler)"
    doc.bullets([
        f"sampler **{_or_unknown(kernel, 'label', '?')}** (`--kernel {_or_unknown(kernel, 'kernel', '?')}`), sha256 `{sha}`",
        f"device: {_or_unknown(kernel, 'device', '?')}; engine {_or_unknown(kernel, 'engine', 'sglang')}, "
        f"{_or_unknown(kernel, 'verification', 'token')} verification",
        f"shapes: batch {shape.batch}, draft steps {shape.steps}, kernel vocab {shape.kernel_vocab}, "
        f"tokenizer vocab {shape.tokenizer_vocab}; seed {kernel.seed}",
    ])
    invariants = list(kernel.rules or {})
    rows = []
    examples = []
    for input_class, outcomes in kernel.by_class().items():
        cells = [input_class]
        for name in invariants:
            outcome = outcomes.get(name)
            if outcome is None:
                cells.append("–")
            elif outcome.passed:
                cells.append("pass")
            else:
                cells.append(f"**FAIL** {outcome.violations}/{outcome.rows}")
                examples.append(f"{name} [{input_class}]: {_example(outcome.example)}")
        rows.append(cells)
    if rows:
        doc.table(Table(["input class", *invariants], rows))
        doc.bullets([f"{name}: {rule}" for name, rule in (kernel.rules or {}).items()])
    doc.bullets(examples)
    family = kernel.distribution
    tests = (family.tests if family is not None else None) or []
    if family is not None and tests:
        doc.paragraph(f"Distribution tests on well-formed input ({family.correction} across {family.family_size} tests, "
                      f"alpha {kernel.alpha}; 'detectable' is the smallest deviation found with {fmt(family.power)} "
                      "probability: a rate shift for acceptance, Cohen's w for the sequence tests, accepted drafts for the "
                      "block-versus-token length).")
        doc.table(Table(["test", "n", "observed", "expected", "p", "Holm p", "detectable", "verdict"], [[
            test.name, str(test.n),
            _observed(test), _expected(test),
            fmt_p(test.p_value), fmt_p(test.adjusted_p), fmt(test.detectable_at_90_power),
            "**fires**" if test.rejected else (test.note or "consistent"),
        ] for test in tests]))
