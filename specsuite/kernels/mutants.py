"""Mutated copies of a release's sampler file, for measuring the kernel suite (tests/kernels/test_kernel_rule.py,
tools/calibration/kernel_rule_power.py): the release's reject_sampling.py from its wheel
(specsuite.kernel_loading.sglang_wheel), with one acceptance comparison scaled by a constant factor, written to a
folder the caller owns.  Nothing of SGLang is kept in the repository.

The lines replaced are 0.5.23's (sglang/kernels/ops/speculative/reject_sampling.py): block verification's
two comparisons of the coin with the stop weight, `coin < prefix_prob` (:80, the early reject) and
`coin < accept_prob` (:114, the stop), both scaled, so the row stops at step i when coin < factor * h_i;
token verification's `coin * q < p` (:149), scaled on p.  A release whose file lacks a line is refused.
"""

from __future__ import annotations

from pathlib import Path

from specsuite.errors import SpecsuiteError
from specsuite.kernel_loading.loader import KERNEL_MEMBER
from specsuite.kernel_loading.sglang_wheel import extract_member

BLOCK_COMPARISONS = ("if coin < prefix_prob:", "if coin < accept_prob:")
TOKEN_COMPARISON = "if q_is_prob & (coin * q < p):"


def _scaled(line: str, factor: float) -> str:
    if line == TOKEN_COMPARISON:
        return f"if q_is_prob & (coin * q < {factor!r} * p):"
    name = line.removeprefix("if coin < ").removesuffix(":")
    return f"if coin < {factor!r} * {name}:"


def acceptance_mutant(factor: float, into: Path, block: bool = True, version: str = "0.5.23") -> Path:
    """A copy of release `version`'s sampler whose block (or token) acceptance is scaled by `factor`;
    returns its path (into/reject_sampling_{block|token}_x{factor}.py)."""
    source = extract_member(version, KERNEL_MEMBER).path.read_text()
    for line in BLOCK_COMPARISONS if block else (TOKEN_COMPARISON,):
        if source.count(line) != 1:
            raise SpecsuiteError(f"sglang=={version}'s {KERNEL_MEMBER} has {source.count(line)} copies of {line!r}, not 1")
        source = source.replace(line, _scaled(line, factor))
    into.mkdir(parents=True, exist_ok=True)
    path = into / f"reject_sampling_{'block' if block else 'token'}_x{factor:g}.py"
    path.write_text(source)
    return path
