"""Resolve SGLang's chain rejection sampler, `chain_speculative_sampling_triton`, from a source the
user names, and pick the device it runs on.

Sources (the `--kernel` option):
- ``installed``: the module inside the SGLang that this Python can find (the node's own install);
- ``sglang==X``: release X's module, taken from its wheel on the package index (cached, sha256 kept);
- a path to a ``.py`` file: a patched checkout, a candidate fix, a kernel under review;
- ``refserver`` / ``refserver:nofix``: the reference server's numpy sampler behind the same call
  signature (``refserver`` is its fix arm), loaded by specsuite.kernels.loader;
- ``vllm==X`` / ``vllm-installed``: vLLM's rejection sampler (`rejection_sample` with `SamplingMetadata`),
  run in the vLLM environment's Python (specsuite.kernels.vllm_sampler, through specsuite.kernels.loader);
  ``:expand-fix`` after it applies the vLLM job's corrected CPU expand (specsuite/fixtures/vllm_patches/expand_fix).

`KernelSpec` parses every source; `load_sglang_kernel` loads the SGLang ones, for the kernel suite
(through specsuite.kernels.loader) and for the reference server's ``--sampler`` alike.

An SGLang source followed by ``:block`` (``sglang==0.5.23:block``) runs the same kernel with
``block_verification=True`` (SGLang 0.5.23+, Sun et al.'s block verification) instead of token verification.

Only the one module file is loaded, on its own: it imports nothing but triton, so SGLang's heavy
package `__init__` never runs and no SGLang dependency is needed.  With no GPU visible to torch the
kernel runs under Triton's interpreter (``TRITON_INTERPRET=1``) on CPU tensors.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any

from specsuite.errors import SpecsuiteError
from specsuite.kernel_loading.sglang_wheel import extract_member

KERNEL_MEMBER = "sglang/kernels/ops/speculative/reject_sampling.py"
KERNEL_FUNCTION = "chain_speculative_sampling_triton"
INTERPRETER_DEVICE = "cpu (triton interpreter)"
REFSERVER_ARMS = ("fix", "nofix")
BLOCK_SUFFIX = ":block"
VLLM_EXPAND_FIX = "expand-fix"
# Kept after the first sentence of the unknown-source message, which the reference server rewrites in its terms.
SGLANG_ENGINE = "sglang"
SGLANG_KINDS = ("installed", "release", "file")  # the sources this module loads; any other kind names its engine itself
OTHER_SOURCES = f"; also vllm==VERSION or vllm-installed (each may end in :{VLLM_EXPAND_FIX}), and {BLOCK_SUFFIX} after an SGLang source"


@dataclass(frozen=True)
class KernelSpec:
    """A parsed `--kernel` value."""

    text: str
    kind: str  # installed | release | file (SGLang's), or the engine's name: refserver | vllm | another engine's
    version: str | None = None
    path: Path | None = None
    refserver_arm: str | None = None
    block: bool = False  # SGLang's block verification instead of token verification
    corrected_expand: bool = False  # vLLM with the project's corrected CPU expand

    @property
    def engine(self) -> str:
        """The engine that loads and calls this source (specsuite/kernels/engines/)."""
        return SGLANG_ENGINE if self.kind in SGLANG_KINDS else self.kind

    @classmethod
    def parse(cls, text: str) -> KernelSpec:
        value = text.strip()
        if value.startswith(("vllm==", "vllm-installed")):
            base, _, suffix = value.partition(":")
            if suffix not in ("", VLLM_EXPAND_FIX):
                raise SpecsuiteError(f"--kernel {text!r}: the only vLLM suffix is :{VLLM_EXPAND_FIX}")
            version = None
            if base.startswith("vllm=="):
                version = base.removeprefix("vllm==").strip()
                if not version:
                    raise SpecsuiteError(f"--kernel {text!r}: name a release, e.g. vllm==0.32.0")
            elif base != "vllm-installed":
                raise SpecsuiteError(f"--kernel {text!r}: expected vllm==VERSION or vllm-installed")
            return cls(value, "vllm", version=version, corrected_expand=suffix == VLLM_EXPAND_FIX)
        if value.endswith(BLOCK_SUFFIX):
            token = cls.parse(value.removesuffix(BLOCK_SUFFIX))
            if token.engine != SGLANG_ENGINE:
                raise SpecsuiteError(f"--kernel {text!r}: {BLOCK_SUFFIX} applies to an SGLang kernel (installed, sglang==VERSION or a file)")
            return replace(token, text=value, block=True)
        if value == "installed":
            return cls(value, "installed")
        if value.startswith("sglang=="):
            version = value.removeprefix("sglang==").strip()
            if not version:
                raise SpecsuiteError(f"--kernel {text!r}: name a release, e.g. sglang==0.5.23")
            return cls(value, "release", version=version)
        if value == "refserver" or value.startswith("refserver:"):
            arm = value.partition(":")[2] or "fix"
            if arm not in REFSERVER_ARMS:
                raise SpecsuiteError(f"--kernel {text!r}: the reference sampler's arms are {', '.join(REFSERVER_ARMS)}")
            return cls(value, "refserver", refserver_arm=arm)
        if value.endswith(".py"):
            path = Path(value).expanduser()
            if not path.is_file():
                raise SpecsuiteError(f"--kernel {text!r}: no such file")
            return cls(value, "file", path=path.resolve())
        raise SpecsuiteError(f"--kernel {text!r}: expected installed, sglang==VERSION, a path to a .py file, or refserver[:nofix]"
                             f"{OTHER_SOURCES}")


@dataclass(frozen=True)
class LoadedKernel:
    """A sampler ready to call, with what is needed to say which one it was."""

    spec: KernelSpec
    label: str
    device: str  # "cuda:0 (<name>)" or INTERPRETER_DEVICE
    torch_device: str  # what tensors go to: "cuda" or "cpu"
    function: Callable[..., Any]
    version: str | None = None
    module_path: Path | None = None
    sha256: str | None = None
    details: dict[str, Any] = field(default_factory=dict)  # engine facts (the vLLM child's start-up answer)

    @property
    def engine(self) -> str:
        return self.spec.engine

    @property
    def verification(self) -> str:
        return "block" if self.spec.block else "token"

    def close(self) -> None:
        """Stop what the kernel holds (the vLLM child process); a no-op for in-process kernels."""
        closer = getattr(self.function, "close", None)
        if callable(closer):
            closer()

    def to_dict(self) -> dict[str, Any]:
        return {"kernel": self.spec.text, "label": self.label, "kind": self.spec.kind, "engine": self.engine,
                "verification": self.verification, "version": self.version,
                "module_path": str(self.module_path) if self.module_path else None, "sha256": self.sha256,
                "device": self.device, **({"engine_details": self.details} if self.details else {})}


def require_torch_and_triton(need_triton: bool) -> ModuleType:
    missing = []
    try:
        import torch
    except ImportError:
        missing.append("torch")
    if need_triton and importlib.util.find_spec("triton") is None:
        missing.append("triton")
    if missing:
        raise SpecsuiteError(f"the kernel suite needs {' and '.join(missing)}: pip install -e '.[kernel]'")
    return torch


def select_device(torch: ModuleType) -> tuple[str, str]:
    """(description, torch device): a GPU when torch sees one (ROCm answers as cuda), else the
    Triton interpreter on CPU.  The interpreter switch must be set before the kernel is decorated."""
    if torch.cuda.is_available():
        return f"cuda:0 ({torch.cuda.get_device_name(0)})", "cuda"
    os.environ["TRITON_INTERPRET"] = "1"
    return INTERPRETER_DEVICE, "cpu"


def _load_module_file(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SpecsuiteError(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # triton's jit resolves globals through the module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # a broken candidate file is the user's input: one line
        del sys.modules[name]
        raise SpecsuiteError(f"loading {path}: {type(exc).__name__}: {exc}") from None
    return module


def _kernel_function(path: Path, tag: str, block: bool = False) -> tuple[Callable[..., Any], str]:
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    module = _load_module_file(path, f"specsuite_kernel_{tag}_{digest[:12]}")
    function = getattr(module, KERNEL_FUNCTION, None)
    if not callable(function):
        raise SpecsuiteError(f"{path} defines no {KERNEL_FUNCTION}()")
    if block and "block_verification" not in inspect.signature(function).parameters:
        raise SpecsuiteError(f"{path}: this {KERNEL_FUNCTION}() has no block_verification option (SGLang 0.5.23 added it)")
    return function, digest


def _installed_module_path() -> tuple[Path, str]:
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        raise SpecsuiteError("--kernel installed: no SGLang is installed for this Python; name a release (sglang==0.5.23) or a file")
    root = Path(next(iter(spec.submodule_search_locations)))
    path = root.parent / KERNEL_MEMBER
    if not path.is_file():
        raise SpecsuiteError(f"--kernel installed: this SGLang has no {KERNEL_MEMBER} (at {root})")
    try:
        version = importlib.metadata.version("sglang")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return path, version


def load_sglang_kernel(source: str | KernelSpec) -> LoadedKernel:
    """Resolve and load SGLang's sampler named by `source` (installed, sglang==VERSION or a file, each
    maybe with :block); every failure is one SpecsuiteError line.  The harness's other engines (the
    reference numpy sampler, vLLM) load through specsuite.kernels.loader.load_kernel and their engine modules
    (specsuite/kernels/engines/)."""
    spec = source if isinstance(source, KernelSpec) else KernelSpec.parse(source)
    if spec.engine != SGLANG_ENGINE:
        raise SpecsuiteError(f"--kernel {spec.text!r}: not an SGLang kernel source (installed, sglang==VERSION or a .py file)")
    torch = require_torch_and_triton(need_triton=True)
    device, torch_device = select_device(torch)
    if spec.kind == "installed":
        path, version = _installed_module_path()
        label = f"installed sglang {version}"
    elif spec.kind == "release":
        assert spec.version is not None
        path, version = extract_member(spec.version, KERNEL_MEMBER).path, spec.version
        label = f"sglang=={version}"
    else:
        assert spec.path is not None
        path, version = spec.path, None
        label = f"file {path}"
    if spec.block:
        label += " block verification"
    function, digest = _kernel_function(path, spec.kind, spec.block)
    return LoadedKernel(spec, label, device, torch_device, function, version=version, module_path=path, sha256=digest)
