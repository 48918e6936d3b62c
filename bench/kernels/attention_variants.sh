#!/usr/bin/env bash
# One device call that checks and times the flash-attention tile configurations (FOVEA_CUDA_ATTN_VARIANT, see
# src/backend/cuda/attention.cu), then runs the full op check (run_ops_device.sh) and Nsight Compute on the
# default variant's ViT and paged-prefill kernels. Logs under $OUT (at most 8 files come back).
set -uo pipefail
bin=${1:-build-cuda/tests/backend/test_ops}
out=${OUT:-out-ops}
mkdir -p "$out"
log="$out/variants.log"
for v in 0 1 3; do  # 0: by mode (default), 1: 4-warp config everywhere, 3: 8-warp config everywhere
  FOVEA_CUDA_ATTN_VARIANT=$v timeout 120 "$bin" --gtest_repeat=2 \
    --gtest_filter='OpsTest.AttentionDense:PagedOpsTest.*:OpsTest.GraphReplayMatchesDirectCalls' > "$out/tmp.log" 2>&1
  rc=$?
  echo "== variant $v correctness rc=$rc" >> "$log"
  grep -E "Failure|normalised|unwritten|FAILED" "$out/tmp.log" | head -20 >> "$log"
  FOVEA_CUDA_ATTN_VARIANT=$v timeout 120 compute-sanitizer --tool racecheck --error-exitcode 3 "$bin" \
    --gtest_filter='PagedOpsTest.PrefillAndChunkedPrefill:OpsTest.AttentionDense' > "$out/tmp.log" 2>&1
  echo "== variant $v racecheck rc=$? $(grep 'RACECHECK SUMMARY' "$out/tmp.log")" >> "$log"
  FOVEA_CUDA_ATTN_VARIANT=$v FOVEA_OPS_PERF=attention timeout 120 "$bin" --gtest_filter='OpsPerf.*' > "$out/tmp.log" 2>&1
  grep -E " ms " "$out/tmp.log" | sed "s/^/v$v /" >> "$log"
done
rm -f "$out/tmp.log"
SKIP_PERF=0 bash "$(dirname "$0")/run_ops_device.sh" "$bin" > /dev/null 2>&1
export FOVEA_OPS_PERF=attention
ncu_args=(--clock-control none --kernel-name regex:flash_attention_mma --launch-count 1 --section SpeedOfLight
          --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats)
{ timeout 120 ncu "${ncu_args[@]}" --launch-skip 3 "$bin" --gtest_filter='OpsPerf.*'
  timeout 120 ncu "${ncu_args[@]}" --launch-skip 26 "$bin" --gtest_filter='OpsPerf.*'; } > "$out/ncu.log" 2>&1
echo "ncu rc=$?" >> "$out/summary.txt"
cat "$log"
grep -E " ms " "$out/perf.log"
grep -E "^\[  (FAILED|PASSED) " "$out/test_ops.log" | sort | uniq -c
tail -2 "$out/memcheck.log" "$out/racecheck.log"
grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Stall|Issued Ipc|No Eligible|One or More|Warp Cycles Per Issued" "$out/ncu.log" | head -40
cat "$out/summary.txt"
