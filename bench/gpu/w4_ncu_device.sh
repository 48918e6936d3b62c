#!/usr/bin/env bash
# Nsight Compute on the W4A16 kernels inside test_ops' perf mode (FOVEA_OPS_PERF=w4): each perf row launches its
# kernel 23 times (3 warm-ups + 20 timed), rows in the order wqkv / wo / w13 / w2 x M = 1, 16, 64, 256 (M = 256
# takes the dequantize + cuBLASLt path), so the fused kernel's launch index picks the shape. Logs under $OUT.
set -uo pipefail
out=${OUT:-out-w4ncu}; mkdir -p "$out"
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
profile() {  # NAME REGEX SKIP
  FOVEA_OPS_PERF=w4 timeout 100 "$ncu" --clock-control none --kernel-name "regex:$2" --launch-skip "$3" \
    --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
    --section LaunchStats --section WarpStateStats --section SchedulerStats --print-details all \
    .carry/bin/test_ops --gtest_filter='OpsPerf.*' > "$out/ncu_$1.log" 2>&1
  echo "== $1 rc=$?"
  grep -E "^  [a-zA-Z_].*\(|Duration|DRAM Throughput|L2 Cache Throughput|Achieved Occupancy|Theoretical Occ|Registers Per|Eligible Warps|Issued Warp|Warp Cycles Per Issued|Stall|Block Limit" "$out/ncu_$1.log" | head -40
}
profile w13_m1 w4_fused 150
profile w13_m64 w4_fused 195
profile wqkv_m64 w4_fused 50
profile dequant w4_dequantize 5
