#!/usr/bin/env bash
# One device call (<= 2 minutes) for the op profiler and the small-M cuBLASLt tuning:
#   1. test_ops (every CUDA op test: the profiler's events and the tuned GEMM algorithms change no result) and
#      test_op_profiler (the event pool on a real stream);
#   2. the perf mode twice, FOVEA_GEMM_TUNE=1 with FOVEA_PROFILE_OPS=1 (so the perf run's own op table and one
#      "gemm tune:" line per tuned shape show), then FOVEA_GEMM_TUNE=0 (cuBLASLt's first heuristic pick);
#   3. a table last: the decode GEMM rows (M = 64) of both perf runs side by side.
# Build on the dev machine and carry the build dir:
#   cmake -S . -B build-prof -G Ninja -DCMAKE_BUILD_TYPE=Release -DFOVEA_TESTS=ON -DCMAKE_CUDA_ARCHITECTURES=90a
#   cmake --build build-prof --target test_ops test_op_profiler
#   bench/kernels/profile_device.sh build-prof        (logs under $OUT, or ./out-profile)
set -uo pipefail
build=${1:?usage: profile_device.sh BUILD_DIR}
ops=$build/tests/backend/test_ops
profiler_test=$build/tests/backend/test_op_profiler
out=${OUT:-out-profile}
mkdir -p "$out"
deadline=$(( $(date +%s) + 115 ))
: > "$out/summary.txt"

# run NAME MAX_SECONDS CMD...: under min(MAX_SECONDS, time left), output to $out/NAME.log, rc to the summary.
run() {
  local name=$1 limit=$2 left; shift 2
  left=$(( deadline - $(date +%s) ))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 3 ]; then echo "$name: no time left" >> "$out/summary.txt"; return; fi
  timeout -k 3 "$limit" "$@" > "$out/$name.log" 2>&1
  echo "$name rc=$? (limit ${limit}s)" >> "$out/summary.txt"
}

{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv || echo "no nvidia-smi"; } > "$out/gpu.txt" 2>&1
run test_ops 45 "$ops"
run test_op_profiler 10 "$profiler_test"
run perf_tuned 40 env FOVEA_OPS_PERF=1 FOVEA_GEMM_TUNE=1 FOVEA_PROFILE_OPS=1 "$ops" --gtest_filter='OpsPerf.*'
run perf_untuned 40 env FOVEA_OPS_PERF=1 FOVEA_GEMM_TUNE=0 "$ops" --gtest_filter='OpsPerf.*'

cat "$out/gpu.txt"
for log in test_ops test_op_profiler; do
  [ -f "$out/$log.log" ] && grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure" "$out/$log.log" | head -20
done
echo "--- gemm tuning (FOVEA_GEMM_TUNE=1):"
grep "^gemm tune:" "$out/perf_tuned.log" 2>/dev/null | head -20
echo "--- op profile of the tuned perf run, by category:"
sed -n '/^category/,/outside any op/p' "$out/perf_tuned.log" 2>/dev/null
echo "--- decode GEMMs, M = 64 (weight bytes read per second): tuned | first heuristic pick"
for row in wqkv wo w13 w2 lm_head; do
  tuned=$(grep -E "^decode $row " "$out/perf_tuned.log" 2>/dev/null | awk '{for (i = 1; i <= NF; ++i) if ($i == "ms") print $(i - 1) " ms " $(i + 1) " GB/s"}')
  plain=$(grep -E "^decode $row " "$out/perf_untuned.log" 2>/dev/null | awk '{for (i = 1; i <= NF; ++i) if ($i == "ms") print $(i - 1) " ms " $(i + 1) " GB/s"}')
  printf '%-8s %-26s | %s\n' "$row" "${tuned:-missing}" "${plain:-missing}"
done
cat "$out/summary.txt"
