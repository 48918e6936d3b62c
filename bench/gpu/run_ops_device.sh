#!/usr/bin/env bash
# One device call of the CUDA backend's checks: correctness (test_ops), perf mode, and compute-sanitizer memcheck
# on the paged/index ops. Expects the binary built on the dev machine and carried along:
#   cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DFOVEA_STATIC=ON -DCMAKE_CUDA_ARCHITECTURES=90a
#   cmake --build build-cuda --target test_ops
# Logs go to $OUT (or ./out-ops); the summary is printed last.
set -uo pipefail
bin=${1:-build-cuda/tests/backend/test_ops}
out=${OUT:-out-ops}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$out/gpu.txt" 2>&1
timeout 300 "$bin" --gtest_repeat=3 > "$out/test_ops.log" 2>&1  # fresh random inputs each repeat
echo "test_ops rc=$?" >> "$out/summary.txt"
if [ "${SKIP_PERF:-0}" != 1 ]; then
  FOVEA_OPS_PERF=1 timeout 200 "$bin" --gtest_filter='OpsPerf.*' > "$out/perf.log" 2>&1
  echo "perf rc=$?" >> "$out/summary.txt"
fi
if [ "${SKIP_MEMCHECK:-0}" != 1 ] && command -v compute-sanitizer >/dev/null; then
  timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 "$bin" \
    --gtest_filter='PagedOpsTest.*:OpsTest.EmbeddingScatterGather:OpsTest.PixelShuffle:OpsTest.RopeAndKvWrite' \
    > "$out/memcheck.log" 2>&1
  echo "memcheck rc=$?" >> "$out/summary.txt"
  # Shared-memory races in the attention kernels (cp.async double buffering, warp-uniform skips).
  timeout 150 compute-sanitizer --tool racecheck --error-exitcode 3 "$bin" \
    --gtest_filter='PagedOpsTest.PrefillAndChunkedPrefill:OpsTest.AttentionDense' > "$out/racecheck.log" 2>&1
  echo "racecheck rc=$?" >> "$out/summary.txt"
fi
cat "$out/gpu.txt"
grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure|error|normalised|unwritten" "$out/test_ops.log" | head -60
[ -f "$out/perf.log" ] && grep -E "ms|FAILED" "$out/perf.log"
[ -f "$out/memcheck.log" ] && tail -3 "$out/memcheck.log"
[ -f "$out/racecheck.log" ] && tail -3 "$out/racecheck.log"
cat "$out/summary.txt"
