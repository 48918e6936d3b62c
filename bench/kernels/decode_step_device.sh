#!/usr/bin/env bash
# One device call for the decode step (64 x 256 tokens, 1 tile, CUDA graphs), in stages that env switches pick:
#   TESTS=1      test_ops (all), then after the benchmarks test_golden_forward, test_runner, and test_golden_forward
#                with the skinny GEMM on (graph decode through it)
#   ATTN="w4 w4s2"  decode-attention kernels (FOVEA_CUDA_DECODE_KERNEL): their paged op tests and OpsPerf
#                attention rows, before the benchmarks
#   SETTINGS="name:VAR=value+VAR=value ..."  decode benchmark settings, interleaved, REPEATS times
#   NCU=1        Nsight Compute on a few decode-step kernels (attention, cuBLASLt GEMMs, skinny GEMMs), eager
# Session 5's first call ran it with the defaults below (dependent launches on/off, skinny GEMM on all or only
# the wqkv / wo shapes). Binaries from .carry/bin; carry .carry. Logs under $OUT (logs.tar.gz), one summary line
# per item on stdout.
set -uo pipefail
source "$(dirname "$0")/device_common.sh"
device_dirs decode_step
start_model_and_workload
begin=$SECONDS
TESTS=${TESTS:-1}
NCU=${NCU:-1}
ATTN=${ATTN:-}
SETTINGS=${SETTINGS:-"nopdl:FOVEA_CUDA_PDL=0 pdl skinny:FOVEA_CUDA_SKINNY_GEMM=1 \
skinny_qkvo:FOVEA_CUDA_SKINNY_GEMM=6144x4096,4096x4096"}
REPEATS=${REPEATS:-2}

summary() { echo "$1 rc=$2 $(grep -E '^\[  (PASSED|FAILED)' "$3" | tr '\n' ' ')"; }
if [ "$TESTS" = 1 ]; then
  timeout 150 "$BIN/test_ops" > "$logs/test_ops.log" 2>&1
  summary test_ops $? "$logs/test_ops.log"
fi
for kernel in $ATTN; do
  FOVEA_CUDA_DECODE_KERNEL=$kernel timeout 60 "$BIN/test_ops" --gtest_filter='PagedOpsTest.*:OpsTest.GraphReplay*' \
    > "$logs/attn_tests_$kernel.log" 2>&1
  summary "attention tests $kernel" $? "$logs/attn_tests_$kernel.log"
  FOVEA_CUDA_DECODE_KERNEL=$kernel FOVEA_OPS_PERF=attention timeout 60 "$BIN/test_ops" --gtest_filter='OpsPerf.*' \
    > "$logs/attn_perf_$kernel.log" 2>&1
  echo "attention perf $kernel rc=$?"
  grep -E "decode" "$logs/attn_perf_$kernel.log" | head -8
done
wait $prep

for rep in $(seq 1 "$REPEATS"); do
  for setting in $SETTINGS; do
    name=${setting%%:*}; vars=()
    [ "$name" != "$setting" ] && IFS=+ read -r -a vars <<< "${setting#*:}"
    ( [ ${#vars[@]} -gt 0 ] && export "${vars[@]}"; decode_bench "${name}_$rep" "$WORK/model" )
  done
done

if [ "$TESTS" = 1 ]; then
  for t in test_golden_forward test_runner; do
    timeout 120 "$BIN/$t" > "$logs/$t.log" 2>&1
    summary "$t" $? "$logs/$t.log"
  done
  FOVEA_CUDA_SKINNY_GEMM=1 timeout 120 "$BIN/test_golden_forward" > "$logs/golden_skinny.log" 2>&1
  summary "golden skinny" $? "$logs/golden_skinny.log"
fi

ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
profile() {  # profile NAME REGEX [VAR=value ...]: a few kernels of decode steps, eager
  local name=$1 regex=$2; shift 2
  [ $((SECONDS - begin)) -lt ${NCU_DEADLINE:-420} ] || { echo "ncu $name: skipped (time)"; return; }
  env "$@" timeout 120 "$ncu" --clock-control none --kernel-name "regex:$regex" --launch-skip 1000 --launch-count 6 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
    --section WarpStateStats --section SchedulerStats \
    "$BIN/fovea" bench --model "$WORK/model" --images "$WORK/images" --backend cuda --count 64 --max-tokens 24 \
    --max-tiles 1 --warmup 0 --decode-reps 1 --gemm-seconds 0 --no-cuda-graphs > "$logs/ncu_$name.log" 2>&1
  echo "ncu $name rc=$?"
  grep -E "^  [a-z_].*\(|DRAM Throughput|Duration|Achieved Occupancy" "$logs/ncu_$name.log" | head -40
}
if [ "$NCU" = 1 ] && [ -n "$ncu" ]; then
  profile attention 'split_decode'
  profile gemm 'nvjet|gemm|xmma|sm90'
  profile skinny 'skinny' FOVEA_CUDA_SKINNY_GEMM=1
fi
tar czf "$out/logs.tar.gz" -C "$out" logs && rm -rf "$logs"
