#!/usr/bin/env bash
# Device call for the wgmma flash-attention kernel (src/backend/cuda/attention_wgmma.cuh): the op tests and the
# golden forward with the default dispatch and with each wgmma
# configuration forced (FOVEA_CUDA_ATTN_VARIANT=21, 22, 29, 31), racecheck/memcheck on the attention tests, and the
# attention perf mode per configuration against 9 (mma.sync only: the dispatch before wgmma). Expects binaries
# built here:
#   cmake -S . -B build-wg -G Ninja -DCMAKE_BUILD_TYPE=Release -DFOVEA_TESTS=ON -DFOVEA_STATIC=ON -DCMAKE_CUDA_ARCHITECTURES=90a
#   cmake --build build-wg -j2 --target test_ops test_golden_forward
# and the goldens' root (compiled in) to resolve on the device: start the command with
#   mkdir -p /work && ln -sfn "$PWD" /work/main
set -uo pipefail
build=${1:-build-wg}
ops=$build/tests/backend/test_ops
golden=$build/tests/runtime/test_golden_forward
out=${OUT:-out-wgmma}
mkdir -p "$out"
sum="$out/wgmma_summary.txt"
passed() { grep -E '^\[  PASSED|^\[  FAILED' "$1" | tail -2 | tr '\n' ' '; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$sum" 2>&1
timeout 60 "$ops" --gtest_repeat=2 > "$out/wg_test_ops_default.log" 2>&1
echo "default test_ops (repeat 2) rc=$? $(passed "$out/wg_test_ops_default.log")" >> "$sum"
timeout 40 "$golden" > "$out/wg_golden_default.log" 2>&1
echo "default test_golden_forward rc=$? $(passed "$out/wg_golden_default.log")" >> "$sum"
for v in 21 22 29 31; do
  FOVEA_CUDA_ATTN_VARIANT=$v timeout 30 "$ops" --gtest_filter='OpsTest.Attention*:PagedOpsTest.*:OpsTest.Graph*' \
    > "$out/wg_test_ops_v$v.log" 2>&1
  echo "variant $v attention tests rc=$? $(passed "$out/wg_test_ops_v$v.log")" >> "$sum"
done
for v in 9 0 29 31; do
  FOVEA_CUDA_ATTN_VARIANT=$v FOVEA_OPS_PERF=attention timeout 25 "$ops" --gtest_filter='OpsPerf.*' > "$out/tmp.log" 2>&1
  grep -E " ms " "$out/tmp.log" | grep -v "total)" | sed "s/^/v$v /" >> "$out/wg_perf.log"
done
rm -f "$out/tmp.log"
cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ -n "$cs" ]; then
  timeout 60 "$cs" --tool racecheck --error-exitcode 3 "$ops" \
    --gtest_filter='PagedOpsTest.PrefillLong*:OpsTest.AttentionDense*' > "$out/wg_racecheck.log" 2>&1
  echo "racecheck default rc=$? $(grep 'RACECHECK SUMMARY' "$out/wg_racecheck.log")" >> "$sum"
  timeout 60 "$cs" --tool memcheck --error-exitcode 3 "$ops" \
    --gtest_filter='PagedOpsTest.Prefill*:OpsTest.AttentionDense' > "$out/wg_memcheck.log" 2>&1
  echo "memcheck default rc=$? $(tail -1 "$out/wg_memcheck.log")" >> "$sum"
fi
cat "$sum"
grep -hE "Failure|normalised|unwritten" "$out"/wg_test_ops_*.log "$out"/wg_golden_*.log | head -20
cat "$out/wg_perf.log"
# Nsight Compute on the ViT-shaped attention (one launch each): wgmma with cp.async (21) and with TMA (31).
ncu_bin=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ -n "$ncu_bin" ]; then
  for v in 21 31; do
    FOVEA_CUDA_ATTN_VARIANT=$v FOVEA_OPS_PERF=attention timeout 90 "$ncu_bin" --clock-control none \
      -k regex:flash_attention --launch-skip 3 --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
      --section ComputeWorkloadAnalysis "$ops" --gtest_filter='OpsPerf.*' > "$out/wg_ncu_v$v.log" 2>&1
    echo "== ncu variant $v (rc=$?)"
    grep -E "flash_attention|Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Warp Cycles Per Issued|Issue Slots Busy|Executed Ipc Active|Stall|No Eligible" "$out/wg_ncu_v$v.log" | head -30
  done
fi
