#!/usr/bin/env bash
# Round-5 device call (one run): the full op tests and the golden forward with the default dispatch AND with each
# candidate flash-attention variant forced (8: two 16-row query tiles per warp, 4 warps; 9: the same with 3
# cp.async stages; see src/backend/cuda/attention.cu), racecheck/memcheck on the candidates' attention tests,
# and the attention perf mode per variant. Variants 8 and 9 are NOT in the tree (run 5 found them slower, see
# bench/results/cuda_ops_2026-11-29.md); to reproduce, first `git apply bench/kernels/round5_two_tile_variants.patch`
# (against commit 9a8ca5a's attention.cu / attention_mma.cuh). Expects binaries built here:
#   cmake -S . -B build-attn2 -G Ninja -DCMAKE_BUILD_TYPE=Release -DFOVEA_STATIC=ON -DCMAKE_CUDA_ARCHITECTURES=90a
#   cmake --build build-attn2 -j2 --target test_ops test_golden_forward
# and the goldens' root (compiled in) to resolve on the device: start the command with
#   mkdir -p /work && ln -sfn "$PWD" /work/main
set -uo pipefail
build=${1:-build-attn2}
ops=$build/tests/backend/test_ops
golden=$build/tests/runtime/test_golden_forward
out=${OUT:-out-r5}
mkdir -p "$out"
sum="$out/summary.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$sum" 2>&1
for v in 0 8 9; do
  FOVEA_CUDA_ATTN_VARIANT=$v timeout 40 "$ops" --gtest_repeat=2 > "$out/test_ops_v$v.log" 2>&1
  echo "variant $v test_ops (repeat 2) rc=$? $(grep -E '^\[  PASSED|^\[  FAILED' "$out/test_ops_v$v.log" | tail -2 | tr '\n' ' ')" >> "$sum"
  FOVEA_CUDA_ATTN_VARIANT=$v timeout 25 "$golden" > "$out/golden_v$v.log" 2>&1
  echo "variant $v test_golden_forward rc=$? $(grep -E '^\[  PASSED|^\[  FAILED' "$out/golden_v$v.log" | tail -2 | tr '\n' ' ')" >> "$sum"
done
for v in 0 8 9; do
  FOVEA_CUDA_ATTN_VARIANT=$v FOVEA_OPS_PERF=attention timeout 20 "$ops" --gtest_filter='OpsPerf.*' > "$out/tmp.log" 2>&1
  grep -E " ms " "$out/tmp.log" | grep -v "total)" | sed "s/^/v$v /" >> "$out/perf.log"
done
FOVEA_CUDA_ATTN_VARIANT=0 FOVEA_OPS_PERF=attention timeout 20 "$ops" --gtest_filter='OpsPerf.*' > "$out/tmp.log" 2>&1
grep -E " ms " "$out/tmp.log" | grep -v "total)" | sed "s/^/v0-again /" >> "$out/perf.log"
rm -f "$out/tmp.log"
if command -v compute-sanitizer > /dev/null; then
  FOVEA_CUDA_ATTN_VARIANT=8 timeout 30 compute-sanitizer --tool racecheck --error-exitcode 3 "$ops" \
    --gtest_filter='PagedOpsTest.PrefillAndChunkedPrefill:OpsTest.AttentionDense' > "$out/racecheck.log" 2>&1
  echo "racecheck v8 rc=$? $(grep 'RACECHECK SUMMARY' "$out/racecheck.log")" >> "$sum"
  FOVEA_CUDA_ATTN_VARIANT=8 timeout 30 compute-sanitizer --tool memcheck --error-exitcode 3 "$ops" \
    --gtest_filter='PagedOpsTest.*:OpsTest.AttentionDense' > "$out/memcheck.log" 2>&1
  echo "memcheck v8 rc=$? $(tail -1 "$out/memcheck.log")" >> "$sum"
fi
cat "$sum"
grep -hE "Failure|normalised|unwritten" "$out"/test_ops_v*.log "$out"/golden_v*.log | head -20
cat "$out/perf.log"
