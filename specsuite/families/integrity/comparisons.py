"""The integrity suite's comparisons of answers: where two answers to one request differ, and the canaries whose
leaking from one request into another's output is the cross-request leak."""

from __future__ import annotations

import random
import re
import string
from dataclasses import dataclass
from typing import Any

from specsuite.server.transport import shorten


def compare_answers(expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    """Where two answers to the same request differ (text byte for byte, ids, finish, count);
    empty when they are the same. Used for stream vs non-stream and alone vs in a batch."""
    differences = []
    text_a, text_b = expected.get("text"), actual.get("text")
    if text_a != text_b:
        a, b = text_a or "", text_b or ""
        cut = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
        differences.append(f"text differs at char {cut} ({len(a)} vs {len(b)} chars): "
                           f"{shorten(repr(a[cut:cut + 30]), 40)} vs {shorten(repr(b[cut:cut + 30]), 40)}")
    ids_a, ids_b = expected.get("output_ids") or [], actual.get("output_ids") or []
    if ids_a != ids_b:
        cut = next((i for i, (x, y) in enumerate(zip(ids_a, ids_b, strict=False)) if x != y), min(len(ids_a), len(ids_b)))
        differences.append(f"output_ids differ at position {cut} ({len(ids_a)} vs {len(ids_b)} ids): {ids_a[cut:cut + 5]} vs {ids_b[cut:cut + 5]}")
    meta_a, meta_b = expected.get("meta_info") or {}, actual.get("meta_info") or {}
    for key in ("finish_reason", "completion_tokens"):
        if meta_a.get(key) != meta_b.get(key):
            differences.append(f"{key} differs: {meta_a.get(key)!r} vs {meta_b.get(key)!r}")
    return differences


CANARY_PATTERN = re.compile(r"canary-[a-z0-9]{10}")


def make_canaries(count: int, seed: int) -> list[str]:
    """`count` distinct canaries `canary-xxxxxxxxxx` (10 lowercase letters/digits), from `seed`."""
    rng = random.Random(seed)
    alphabet = string.ascii_lowercase + string.digits
    canaries: list[str] = []
    while len(canaries) < count:
        canary = "canary-" + "".join(rng.choices(alphabet, k=10))
        if canary not in canaries:
            canaries.append(canary)
    return canaries


@dataclass(frozen=True)
class CanaryLeak:
    """Request `owner`'s canary showed up in request `found_in`'s output."""

    canary: str
    owner: int
    found_in: int

    def describe(self) -> str:
        return f"canary {self.canary} of request {self.owner} appears in the output of request {self.found_in}"


def find_canary_leaks(canaries: list[str], outputs: list[str]) -> list[CanaryLeak]:
    """Every (canary, output) pair where a request's output holds another request's canary."""
    leaks = []
    for found_in, text in enumerate(outputs):
        for owner, canary in enumerate(canaries):
            if owner != found_in and canary in text:
                leaks.append(CanaryLeak(canary, owner, found_in))
    return leaks
