"""Files from a published SGLang release, without installing it.

`pip download --no-deps sglang==X` fetches the release's wheel from the package index; only the
members asked for are extracted into a cache folder (``$SPECSUITE_CACHE_DIR``, default
``~/.cache/specsuite``), each with its sha256 recorded beside it.  Nothing of SGLang is kept in this
repository: the kernel suite loads its sampler from here, and the contract tests read SGLang's
source from here.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from specsuite.errors import SpecsuiteError

CACHE_ENV = "SPECSUITE_CACHE_DIR"
PIP_TIMEOUT_S = 300.0  # the whole download; pip's own per-socket timeout is set below it
_VERSION_RE = re.compile(r"^\d+(\.\d+)*([a-z0-9.+-]*)$")


@dataclass(frozen=True)
class ExtractedMember:
    """One file taken from a release's wheel, where it was put, and its digest."""

    version: str
    member: str  # path inside the wheel, e.g. sglang/kernels/ops/speculative/reject_sampling.py
    path: Path
    sha256: str
    wheel_name: str


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "specsuite")


def _release_dir(version: str) -> Path:
    if not _VERSION_RE.match(version):
        raise SpecsuiteError(f"not an SGLang release version: {version!r} (expected e.g. 0.5.23)")
    return cache_root() / "sglang" / version


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _download_wheel(version: str, into: Path) -> Path:
    """pip download the release's wheel (no dependencies) and return its path."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--timeout", "60",
               "--dest", str(into), f"sglang=={version}"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise SpecsuiteError(f"fetching sglang=={version}: pip download did not finish in {PIP_TIMEOUT_S:.0f} s") from None
    wheels = sorted(into.glob(f"sglang-{version}-*.whl"))
    if done.returncode != 0 or not wheels:
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip() and "is ignored" not in line]
        why = lines[-1].strip() if lines else f"pip exited {done.returncode}"
        raise SpecsuiteError(f"cannot fetch sglang=={version} from the package index ({why}); "
                             f"on an offline machine pass --kernel PATH to a reject_sampling.py, or fill {cache_root()}")
    return wheels[0]


def extract_members(version: str, members: list[str]) -> dict[str, ExtractedMember]:
    """The named files of release `version`, from the cache or from a fresh wheel download."""
    release = _release_dir(version)
    wanted = {member: release / member for member in members}
    missing = [member for member, path in wanted.items() if not path.is_file()]
    if missing:
        with tempfile.TemporaryDirectory(prefix="specsuite-wheel-") as tmp:
            wheel = _download_wheel(version, Path(tmp))
            with zipfile.ZipFile(wheel) as archive:
                names = set(archive.namelist())
                for member in missing:
                    if member not in names:
                        raise SpecsuiteError(f"sglang=={version} has no {member} (this release predates or moved it)")
                    target = wanted[member]
                    target.parent.mkdir(parents=True, exist_ok=True)
                    partial = target.with_suffix(target.suffix + ".partial")
                    partial.write_bytes(archive.read(member))
                    partial.replace(target)  # never leave a half-written file under the cached name
            (release / "WHEEL_NAME").write_text(wheel.name + "\n")
    wheel_name_file = release / "WHEEL_NAME"
    wheel_name = wheel_name_file.read_text().strip() if wheel_name_file.is_file() else "?"
    return {member: ExtractedMember(version, member, path, _sha256(path), wheel_name) for member, path in wanted.items()}


def extract_member(version: str, member: str) -> ExtractedMember:
    return extract_members(version, [member])[member]
