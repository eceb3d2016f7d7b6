"""The project's vLLM patches (specsuite/fixtures/vllm_patches) and the gate that calls a run corrected.

Offline: a stand-in `vllm` package (tmp_path) plays vLLM's CPU fallback module and API server, so these
show, without vLLM, that the patch replaces the expand and prints its line once, that the line is absent
without the patch, and that serve-vllm refuses a server whose log lacks it. The corrected expand is checked
against the definition on random layouts. The real vLLM run is .ci/vllm-job.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from specsuite.errors import SpecsuiteError
from specsuite.server.kinds.vllm import patches as vllm_patches
from specsuite.server.kinds.vllm.patches import PATCHES, PATCHES_DIR, patch_env, patch_problem, require_patch_active

EXPAND_DIR = PATCHES_DIR / "expand_fix"
BIAS_DIR = PATCHES_DIR / "planted_bias"


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def fix():
    return _load(EXPAND_DIR / "specsuite_expand_fix.py", "specsuite_expand_fix")


@pytest.fixture(scope="module")
def bias(fix):
    return _load(BIAS_DIR / "specsuite_planted_bias.py", "specsuite_planted_bias")


def test_harness_prefixes_are_the_patch_modules_own(fix, bias):
    assert PATCHES["expand_fix"].activation_prefix == fix.ACTIVATION_PREFIX and fix.ACTIVATION_LINE.startswith(fix.ACTIVATION_PREFIX)
    assert PATCHES["planted_bias"].activation_prefix == bias.ACTIVATION_PREFIX
    assert fix.FAILURE_PREFIX.startswith(vllm_patches.FAILURE_MARK) and bias.FAILURE_PREFIX.startswith(vllm_patches.FAILURE_MARK)
    assert bias.C_ENV == vllm_patches.PLANTED_BIAS_C_ENV
    for patch in PATCHES.values():
        assert (patch.paths[0] / "sitecustomize.py").is_file()


def _expand_by_definition(values, ends, total, replace_from, replace_to):
    out, start = [None] * total, 0
    for value, end in zip(values, ends, strict=True):
        for slot in range(start, end):
            out[slot] = replace_to if value == replace_from else value
        start = end
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.int64])
def test_corrected_expand_matches_the_definition(fix, dtype):
    gen = torch.Generator().manual_seed(2301)
    for _ in range(200):
        batch = int(torch.randint(1, 9, (1,), generator=gen))
        counts = torch.randint(0, 5, (batch,), generator=gen)  # requests with no draft tokens too
        ends = torch.cumsum(counts, 0).to(torch.int32)
        values = torch.randint(0, 3, (batch,), generator=gen).to(dtype) * (0.5 if dtype.is_floating_point else 1)
        total = int(ends[-1])
        out = torch.full((total,), -7, dtype=dtype)
        fix.corrected_expand(out, values, ends, 0, 1)
        assert out.tolist() == _expand_by_definition(values.tolist(), ends.tolist(), total, 0, 1)


def _fake_vllm(root: Path, *, serve: bool = False) -> Path:
    """A stand-in vLLM: a broken CPU fallback module (writes nothing) and, with `serve`, an API server
    that imports it (as the CPU worker does), answers /health and exits after 4 s."""
    pkg = root / "vllm"
    (pkg / "utils").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "utils" / "__init__.py").write_text("")
    (pkg / "utils" / "cpu_triton_utils.py").write_text(textwrap.dedent("""
        def _expand_kernel_impl(output, input_val, cu_num_tokens, replace_from, replace_to, MAX_NUM_TOKENS=None):
            pass  # the stock bug's effect: the output is never written

        def _rejection_random_sample_kernel_impl(output_token_ids, cu, draft, draft_probs, target_probs, *rest):
            output_token_ids.append(target_probs)
    """))
    if serve:
        (pkg / "entrypoints" / "openai").mkdir(parents=True)
        (pkg / "entrypoints" / "__init__.py").write_text("")
        (pkg / "entrypoints" / "openai" / "__init__.py").write_text("")
        (pkg / "entrypoints" / "openai" / "api_server.py").write_text(textwrap.dedent("""
            import http.server, sys, threading
            import vllm.utils.cpu_triton_utils  # the CPU platform registers its overrides from it
            port = int(sys.argv[sys.argv.index("--port") + 1])

            class Health(http.server.BaseHTTPRequestHandler):
                def do_GET(self):
                    self.send_response(200); self.end_headers()
                def log_message(self, *args):
                    pass

            server = http.server.HTTPServer(("127.0.0.1", port), Health)
            threading.Timer(4.0, server.shutdown).start()
            server.serve_forever()
        """))
    return root


PROBE = ("import vllm.utils.cpu_triton_utils as m, torch\n"
         "out = torch.zeros(4)\n"
         "m._expand_kernel_impl(out, torch.tensor([0.6, 1.0]), torch.tensor([1, 4], dtype=torch.int32), 0, 1)\n"
         "print(out.tolist())\n")


def _run(pythonpath: list[Path], code: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join(map(str, pythonpath))}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=120)


def test_sitecustomize_corrects_the_expand_and_says_so_once(tmp_path, fix):
    fake = _fake_vllm(tmp_path)
    patched = _run([EXPAND_DIR, fake], PROBE)
    assert patched.returncode == 0, patched.stderr
    assert [round(v, 3) for v in eval(patched.stdout)] == [0.6, 1.0, 1.0, 1.0]
    lines = patched.stderr.splitlines()
    assert lines.count(fix.ACTIVATION_LINE) == 1 and patch_problem(patched.stderr, "expand_fix") is None
    stock = _run([fake], PROBE)  # without the patch: the stand-in's bug, and no line
    assert eval(stock.stdout) == [0.0] * 4 and patch_problem(stock.stderr, "expand_fix") is not None


def test_planted_bias_scales_only_the_accept_tests_p(tmp_path, bias):
    fake = _fake_vllm(tmp_path)
    code = ("import vllm.utils.cpu_triton_utils as m, torch\n"
            "seen = []\n"
            "m._rejection_random_sample_kernel_impl(seen, None, None, None, torch.tensor([0.2, 0.5]), 'rest')\n"
            "print(seen[0].tolist(), m._expand_kernel_impl.__name__)\n")
    run = _run([BIAS_DIR, EXPAND_DIR, fake], code, {"SPECSUITE_PLANTED_BIAS_C": "1.25"})
    assert run.returncode == 0, run.stderr
    assert run.stdout.split()[-1] == "corrected_expand" and [round(v, 4) for v in eval(run.stdout.rsplit(" ", 1)[0])] == [0.25, 0.625]
    assert patch_problem(run.stderr, "planted_bias") is None and patch_problem(run.stderr, "expand_fix") is None
    bad = _run([BIAS_DIR, EXPAND_DIR, fake], "import vllm.utils.cpu_triton_utils", {"SPECSUITE_PLANTED_BIAS_C": "lots"})
    assert "SPECSUITE_PLANTED_BIAS_C='lots' is not a positive number" in bad.stderr
    assert patch_problem(bad.stderr, "planted_bias").startswith("specsuite-vllm-patch FAILED")


def test_patch_env_and_bad_input():
    env = patch_env("planted_bias", 1.25)
    assert env["PYTHONPATH"].split(os.pathsep)[:2] == [str(BIAS_DIR), str(EXPAND_DIR)] and env["SPECSUITE_PLANTED_BIAS_C"] == "1.25"
    assert patch_env("expand_fix")["PYTHONPATH"].split(os.pathsep)[0] == str(EXPAND_DIR)
    with pytest.raises(SpecsuiteError, match="needs --planted-bias-c"):
        patch_env("planted_bias")
    with pytest.raises(SpecsuiteError, match="goes with --patch planted_bias"):
        patch_env("expand_fix", 1.1)
    with pytest.raises(SpecsuiteError, match="unknown vLLM patch"):
        patch_env("everything")


def test_only_this_starts_line_counts(tmp_path, fix):
    log = tmp_path / "vllm.log"
    log.write_text(f"=== specsuite: starting a\n{fix.ACTIVATION_LINE}\n=== specsuite: starting b\nINFO ready\n")
    with pytest.raises(SpecsuiteError, match="the expand_fix patch is not active"):
        require_patch_active(log, "expand_fix")
    log.write_text(log.read_text() + f"(EngineCore pid=7) {fix.ACTIVATION_LINE}\n")
    assert require_patch_active(log, "expand_fix") == fix.ACTIVATION_LINE
    with pytest.raises(SpecsuiteError, match="cannot read the server log"):
        require_patch_active(tmp_path / "missing.log", "expand_fix")


@pytest.mark.parametrize("patched", [True, False])
def test_serve_vllm_refuses_a_server_without_the_line(tmp_path, monkeypatch, capsys, patched):
    from specsuite.cli import serve_vllm
    from specsuite.cli.main import main
    from specsuite.server.launcher import find_free_port

    fake = _fake_vllm(tmp_path / "fake", serve=True)
    if not patched:  # a server that never imports the CPU fallbacks: the patch cannot have acted
        (fake / "vllm" / "entrypoints" / "openai" / "api_server.py").write_text(
            (fake / "vllm" / "entrypoints" / "openai" / "api_server.py").read_text().replace("import vllm.utils.cpu_triton_utils", "pass"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(fake))
    monkeypatch.setattr(serve_vllm, "find_vllm_python", lambda explicit=None: sys.executable)
    assert main(["serve-vllm", "--method", "none", "--port", str(find_free_port()), "--patch", "expand_fix", "--ready-timeout", "60"]) == 1
    printed = capsys.readouterr()
    if patched:  # active, then the stand-in exits on its own after 4 s
        assert "patch expand_fix is active: specsuite-vllm-patch active: expand_fix" in printed.out
        assert "vLLM (none) exited" in printed.err
    else:
        assert "the expand_fix patch is not active" in printed.err and "is active" not in printed.out
