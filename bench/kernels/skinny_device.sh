#!/usr/bin/env bash
# One device call (under 4 minutes) for the skinny decode GEMM (src/backend/cuda/gemm_skinny.cu: wgmma fed by
# TMA through an mbarrier ring, split-K over a cluster):
#   1. test_ops' linear cases, CPU reference vs CUDA (LinearSkinnyDecodeShapes: the decode shapes on the skinny
#      kernel, bit-identical reruns, and shapes it refuses);
#   2. compute-sanitizer memcheck on LinearSkinnyDecodeShapes, and racecheck on its first 12 skinny launches only
#      (M = 1 and M = 7 on each of the three shapes, twice; the 28672-row case took over 120 s under racecheck);
#   3. OpsPerf's skinny rows (FOVEA_OPS_PERF=skinny): skinny against cuBLASLt for wqkv, wo, w13, w2 at M = 1..64,
#      and the skinny kernel at M = 64 with each K split count (the launcher's pick marked "*");
# then a table: per shape and M, microseconds and TB/s of weight traffic on both paths, and the goal at M = 64.
# Usage: bench/kernels/skinny_device.sh [dir holding test_ops, default .carry/bin]; logs under $OUT.
set -uo pipefail
BIN=${1:-.carry/bin}
out=${OUT:-out-skinny}
logs=$out/logs
mkdir -p "$logs"
ops=$BIN/test_ops
budget=225  # seconds for the whole script; later steps get what the earlier ones left
limit() {   # limit WANTED RESERVED: a timeout of at most WANTED that leaves RESERVED seconds of the budget
  local left=$((budget - SECONDS - $2))
  echo $(($1 < left ? $1 : (left > 5 ? left : 5)))
}
results() { grep -E '^\[  (PASSED|FAILED)' "$1" | tr '\n' ' '; }

timeout "$(limit 60 150)" "$ops" --gtest_filter='OpsTest.Linear*' > "$logs/test_linear.log" 2>&1
echo "test_ops Linear* rc=$? $(results "$logs/test_linear.log")"
grep -E "Failure|normalised error|differs|unwritten|exception" "$logs/test_linear.log" | head -12

cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ -n "$cs" ]; then
  for tool in memcheck racecheck; do
    reserve=$([ $tool = memcheck ] && echo 100 || echo 40)
    only=()  # racecheck: the first 12 launches of the skinny kernel; the rest run unchecked
    [ $tool = racecheck ] && only=(--kernel-name kns=skinny_gemm_kernel --launch-count 12)
    timeout "$(limit 120 $reserve)" "$cs" --tool $tool "${only[@]}" --error-exitcode 3 "$ops" \
      --gtest_filter='OpsTest.LinearSkinnyDecodeShapes' > "$logs/$tool.log" 2>&1
    echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$logs/$tool.log" | tail -1)"
    grep -qE 'ERROR SUMMARY|RACECHECK SUMMARY' "$logs/$tool.log" || head -3 "$logs/$tool.log"  # e.g. an option refused
  done
else
  echo "compute-sanitizer not found: memcheck and racecheck skipped"
fi

FOVEA_OPS_PERF=skinny timeout "$(limit 60 0)" "$ops" --gtest_filter='OpsPerf.*' > "$logs/perf.log" 2>&1
echo "perf rc=$? (${SECONDS}s so far)"
grep -E "^skinny-split|skipped" "$logs/perf.log"
# Rows: "<path> <shape> M=<m>  <ms> ms  <GB/s> GB/s ...", path skinny or cublaslt. Microseconds come from the
# GB/s column and the weight bytes (the ms column has 1 us resolution).
awk '
  BEGIN {
    bytes["wqkv"] = 2 * 6144 * 4096; bytes["wo"] = 2 * 4096 * 4096; bytes["w13"] = 2 * 28672 * 4096
    bytes["w2"] = 2 * 4096 * 14336
    goal["wqkv"] = 14; goal["wo"] = 9.5; goal["w13"] = 61; goal["w2"] = 33
  }
  $1 == "skinny" || $1 == "cublaslt" {
    key = $2 " " $3
    if (!(key in seen)) { seen[key] = 1; order[n++] = key }
    gbs[$1, key] = $6
  }
  END {
    printf "%-12s %10s %10s %11s %11s %8s %8s\n", "shape", "skinny_us", "cublas_us", "skinny_TB/s", "cublas_TB/s",
           "speedup", "goal_us"
    for (i = 0; i < n; ++i) {
      k = order[i]; split(k, part, " "); b = bytes[part[1]]; s = gbs["skinny", k]; c = gbs["cublaslt", k]
      printf "%-12s %10.1f %10.1f %11.2f %11.2f %8.2f %8s\n", k, (s > 0 ? b / s / 1e3 : 0), (c > 0 ? b / c / 1e3 : 0),
             s / 1000, c / 1000, (c > 0 ? s / c : 0), (part[2] == "M=64" ? goal[part[1]] : "-")
    }
  }' "$logs/perf.log"
