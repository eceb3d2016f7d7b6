"""The embedded reference server: a CPU emulation of an SGLang EAGLE server whose `draft_probs`
is recycled in the CUDA-graph pool (nofix) or copied out and range-guarded (fix) (`python -m specsuite.refserver`)."""
