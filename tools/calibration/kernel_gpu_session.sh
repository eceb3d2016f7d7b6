#!/usr/bin/env bash
# The kernel suite and the kernel timings on a GPU node, at GLM-5.2's shapes, in one go.
#   OUT=/tmp/kernel-gpu bash tools/calibration/kernel_gpu_session.sh
# Needs torch with CUDA or ROCm, triton and the project's Python dependencies; on a machine without
# the package index, set SPECSUITE_CACHE_DIR to a folder holding the releases' reject_sampling.py
# (specsuite/kernel_loading/sglang_wheel.py's layout).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kernel-gpu}
PY=${PY:-python3}
mkdir -p "$OUT"
shape=(--kernel-vocab 154880 --tokenizer-vocab 154856)

"$PY" tools/calibration/kernel_gpu_timing.py --out "$OUT/timing.json" 2>&1 | tee "$OUT/timing.txt"
for kernel in sglang==0.5.20 sglang==0.5.23; do
  for batch in 1 8 64; do
    tag="${kernel#sglang==}-bs$batch"
    start=$(date +%s)
    "$PY" -m pytest suites -m kernel -q -p no:cacheprovider --kernel "$kernel" "${shape[@]}" --kernel-batch "$batch" \
      --results-dir "$OUT/results" --run-id "$tag" > "$OUT/suite-$tag.log" 2>&1
    echo "suite $kernel batch $batch: exit $? in $(( $(date +%s) - start )) s; $(tail -1 "$OUT/suite-$tag.log")" | tee -a "$OUT/suites.txt"
  done
done
"$PY" tools/calibration/kernel_conformance_sweep.py --seeds 2 --batch 64 --vocab 154880 --tokenizer-vocab 154856 2>&1 | tee "$OUT/conformance.txt"
