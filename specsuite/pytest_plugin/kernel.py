"""pytest options and fixtures of the kernel suite (suites/test_kernel.py, marker `kernel`).

    pytest suites/ -m kernel --kernel installed          # the sampler of this node's SGLang
    pytest suites/ -m kernel --kernel sglang==0.5.23     # a release (wheel fetched once, cached)
    pytest suites/ -m kernel --kernel path/to/reject_sampling.py
    pytest suites/ -m kernel --kernel sglang==0.5.23:block   # the same kernel, block verification
    pytest suites/ -m kernel --kernel vllm-installed         # vLLM's sampler, in SPECSUITE_VLLM_PYTHON
    pytest suites/ -m kernel --kernel vllm==0.32.0:expand-fix   # ... with the corrected CPU expand

No server is started for it.  The kernel is loaded once, after collection, and only when a
kernel test is selected; a source that cannot be loaded (no SGLang installed, an offline machine
without the cached wheel, a broken file) is one line and exit 4.  Without --kernel the suite uses
the installed SGLang when there is one and skips with the reason otherwise (one
line under `-m kernel`; in a plain `pytest suites/` only pytest's skip report gives it).  Results go into the
session's results.json under "kernel" (a kernel-only session opens its own run folder).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from specsuite.errors import SpecsuiteError
from specsuite.kernels import engines
from specsuite.kernels.inputs import KernelShape
from specsuite.kernels.suite import KernelSuiteRun
from specsuite.results.store import RunDirectory
from specsuite.session.option_table import add_pytest_options

if TYPE_CHECKING:
    from specsuite.pytest_plugin.core import SpecsuiteSession
    from specsuite.session.config import RunConfig

KERNEL_MARKER = "kernel"


def pytest_addoption(parser: pytest.Parser) -> None:
    add_pytest_options(parser.getgroup, "kernel")  # the "specsuite kernel" group (specsuite/session/option_table.py)


@dataclass
class KernelSession:
    """The loaded suite run, or why there is none."""

    run: KernelSuiteRun | None = None
    skip_reason: str | None = None


KERNEL_KEY = pytest.StashKey[KernelSession]()


def _specsuite_state(config: pytest.Config) -> SpecsuiteSession:
    from specsuite.pytest_plugin.core import specsuite_session  # registered by conftest before this module runs hooks

    return specsuite_session(config)


def _shape(run_config: RunConfig) -> KernelShape:
    kernel = run_config.kernel
    tokenizer = kernel.tokenizer_vocab
    return KernelShape(batch=kernel.batch, steps=kernel.steps, kernel_vocab=kernel.vocab,
                       tokenizer_vocab=kernel.vocab if tokenizer is None else tokenizer)


def _load(run_config: RunConfig) -> KernelSession:
    from specsuite.kernels.loader import load_kernel  # torch is imported only when a kernel test runs

    source = run_config.kernel.source
    shape = _shape(run_config)  # bad shapes fail before anything is loaded
    rows = run_config.kernel.dist_rows
    if rows < 1:
        raise SpecsuiteError(f"--kernel-dist-rows must be at least 1, got {rows}")
    if source is None:
        source, missing = engines.default_source()  # the default engine's (specsuite/kernels/engines/), when it can load here
        if source is None:
            return KernelSession(skip_reason=missing)
    kernel = load_kernel(source)
    seed = run_config.kernel.seed
    run = KernelSuiteRun(kernel, shape, seed=run_config.seed if seed is None else seed, alpha=run_config.alpha, distribution_rows=rows)
    return KernelSession(run=run)


def _kernel_asked_for(config: pytest.Config, items: list[pytest.Item]) -> bool:
    """Whether the user asked for the kernel suite: `-m kernel` (in any expression), or only kernel tests selected.
    A plain `pytest suites/` collects the kernel tests too; announcing their skip there on every run is noise."""
    markexpr = config.getoption("markexpr", "") or ""  # pytest's own -m, not a specsuite option
    return KERNEL_MARKER in markexpr.replace("not kernel", "") or all(item.get_closest_marker(KERNEL_MARKER) for item in items)


def write_kernel_results(config: pytest.Config, status: str = "running") -> None:
    session = config.stash.get(KERNEL_KEY, None)
    if session is None or session.run is None:
        return
    state = _specsuite_state(config)
    state.sections["kernel"] = session.run.to_dict()
    state.write_results(status)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    if config.option.collectonly or not any(item.get_closest_marker(KERNEL_MARKER) for item in session.items):
        return
    try:
        state = _specsuite_state(config)
        kernel_session = _load(state.run_config)
        if kernel_session.run is not None and state.run_dir is None:
            state.run_dir = RunDirectory(state.run_config.results_dir, run_id=state.run_config.run_id)
    except SpecsuiteError as exc:
        raise pytest.UsageError(f"specsuite: {exc}") from None
    config.stash[KERNEL_KEY] = kernel_session
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    run = kernel_session.run
    if reporter is not None:
        if run is None:
            if _kernel_asked_for(config, session.items):  # otherwise the skip is pytest's own "s", reason in -rs
                reporter.write_line(f"specsuite kernel: skipped ({kernel_session.skip_reason})")
        else:
            kernel = run.kernel
            sha = f"sha256 {kernel.sha256[:16]}" if kernel.sha256 else "no file"
            reporter.write_line(f"specsuite kernel: {kernel.label} ({sha}) on {kernel.device}; shapes {run.shape.to_dict()}; "
                                f"seed {run.seed}; results {state.run_dir.path}")
            resolution = run.monte_carlo()
            reporter.write_line(f"specsuite kernel: distribution family of {resolution.family_size} tests at alpha {run.alpha:g} (Holm); "
                                f"Monte Carlo X^2 p-values reach {resolution.smallest_p_value:.2g} ({resolution.draws} null draws): "
                                f"they can reject in families of up to {resolution.largest_family_x2_can_reject} tests")
    write_kernel_results(config)


@pytest.hookimpl(tryfirst=True)  # before the main plugin writes the final results.json
def pytest_sessionfinish(session: pytest.Session) -> None:
    session_state = session.config.stash.get(KERNEL_KEY, None)
    if session_state is not None and session_state.run is not None:
        _specsuite_state(session.config).sections["kernel"] = session_state.run.to_dict()
        session_state.run.kernel.close()  # the vLLM child process, where there is one


@pytest.fixture(scope="session")
def kernel_suite(pytestconfig: pytest.Config) -> KernelSuiteRun:
    """The session's kernel-suite run; skips with the reason when there is no kernel to test."""
    session = pytestconfig.stash.get(KERNEL_KEY, None)
    if session is None:
        pytest.skip("the kernel suite was not set up (no kernel test selected at collection)")
    if session.run is None:
        pytest.skip(session.skip_reason or "no kernel")
    return session.run


@pytest.fixture
def record_kernel_results(pytestconfig: pytest.Config) -> Iterator[None]:
    """Rewrite results.json after the test (so a crash loses nothing already measured)."""
    yield
    write_kernel_results(pytestconfig)
