"""Loading SGLang's chain rejection sampler kernel, shared by the harness and the reference server.

One loader for both: `loader` parses a kernel source (`KernelSpec`) and loads SGLang's
`chain_speculative_sampling_triton` from the node's install, a release's wheel (`sglang_wheel`) or
a file; `invoke.run_chain` calls it on numpy arrays and returns a `ChainOutcome` (`outcome`);
`errors.SpecsuiteError` is the project's one-line error.  This package sits at the bottom of the
import graph: it imports nothing of the project outside itself (tests/packaging/test_layering.py holds it).
The harness adds its other engines (the reference numpy sampler, vLLM), one module each, in specsuite/kernels/engines/.
"""
