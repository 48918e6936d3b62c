#!/usr/bin/env bash
# One device call (2-9 minutes, BUDGET seconds at most): A/B runs of the attention configurations and engine
# settings (written for the pipelined wgmma attention, attention_wgmma_pipelined.cuh; session 3 used it for the
# sweep and the defaults of bench/results/cuda_ops_2026-11-29.md, runs 11-13).
#   1. test_ops (all, default dispatch) and test_golden_forward; the full OpsPerf table (rope, GEMMs, decode).
#   2. Per VARIANTS entry (FOVEA_CUDA_ATTN_VARIANT): the attention op tests (dense, paged, graph replay) and
#      OpsPerf=attention timings; per DECODE_OPS setting the paged-decode OpsPerf rows.
#   3. racecheck of the RACE_VARIANTS on the prefill and dense tests.
#   4. fovea bench (official tiling, 96 requests; random InternVL2-8B-shaped model) under the BENCHES settings
#      and the decode benchmark (64 x 256 tokens) under the DECODES settings (NAME:ENV=VALUE,ENV=VALUE each).
# Example: VARIANTS="29 47" DECODE_OPS="waves1:FOVEA_CUDA_DECODE_WAVES=1" DECODES="default"
#   BENCHES="default old:FOVEA_CUDA_ATTN_VARIANT_D128=29,FOVEA_CUDA_ATTN_VARIANT_D64=31" bash $0
# Binaries from .carry/bin (bench/gpu/final_call.sh --stage); carry .carry. Logs under $OUT (tarred).
set -uo pipefail
BIN=${BIN:-.carry/bin}
out=${OUT:-out-pipelined}
mkdir -p "$out/logs" && logs=$out/logs
WORK=${WORK:-/tmp/fovea_pipe}
mkdir -p "$WORK" /work && ln -sfn "$PWD" /work/main
passed() { grep -E '^\[  PASSED|^\[  FAILED' "$1" | tail -2 | tr '\n' ' '; }
# Settings are NAME or NAME:ENV=VALUE,ENV=VALUE.
run_setting() {  # run_setting KIND SETTING: sets name and env_args
  name=${2%%:*}; env_args=()
  [ "$name" != "$2" ] && IFS=, read -ra env_args <<< "${2#*:}"
  return 0
}
VARIANTS=${VARIANTS-"29 31 44 47"}
BUDGET=${BUDGET:-540}  # seconds; later steps are skipped past it so that the logs still come back
time_left() { [ "$SECONDS" -lt "$BUDGET" ] || { echo "skipped $1: ${SECONDS}s used"; return 1; }; }

# Model and workload first, in the background: they need the CPU only while the op checks use the GPU.
source "$(dirname "$0")/device_common.sh"
start_model_and_workload

timeout 90 "$BIN/test_ops" > "$logs/test_ops.log" 2>&1; echo "test_ops rc=$? $(passed "$logs/test_ops.log")"
timeout 90 "$BIN/test_golden_forward" > "$logs/golden.log" 2>&1; echo "golden rc=$? $(passed "$logs/golden.log")"
FOVEA_OPS_PERF=1 timeout 90 "$BIN/test_ops" --gtest_filter='OpsPerf.*' > "$logs/perf_all.log" 2>&1
grep -E " ms " "$logs/perf_all.log" | grep -E "rope|attention|paged|w13|decode" | sed 's/^/default /'
for v in $VARIANTS; do
  time_left "variant $v" || break
  FOVEA_CUDA_ATTN_VARIANT=$v timeout 60 "$BIN/test_ops" \
    --gtest_filter='OpsTest.AttentionDense*:PagedOpsTest.*:OpsTest.GraphReplayMatchesDirectCalls' \
    > "$logs/check_v$v.log" 2>&1
  echo "v$v check rc=$? $(passed "$logs/check_v$v.log")"
  FOVEA_CUDA_ATTN_VARIANT=$v FOVEA_OPS_PERF=attention timeout 60 "$BIN/test_ops" --gtest_filter='OpsPerf.*' \
    > "$logs/perf_v$v.log" 2>&1
  grep -E " ms " "$logs/perf_v$v.log" | grep -E "vit attention|paged prefill|paged chunk" | sed "s/^/v$v /"
done
# Decode attention settings at the op level (the paged decode rows of OpsPerf=attention).
for setting in ${DECODE_OPS:-}; do
  run_setting ops "$setting"
  time_left "decode ops $name" || break
  env "${env_args[@]}" FOVEA_OPS_PERF=attention timeout 60 "$BIN/test_ops" --gtest_filter='OpsPerf.*' \
    > "$logs/decode_ops_$name.log" 2>&1
  grep -E " ms " "$logs/decode_ops_$name.log" | grep -E "paged decode" | sed "s/^/$name /"
done
for v in ${RACE_VARIANTS-44 47}; do
  time_left "racecheck $v" || break
  FOVEA_CUDA_ATTN_VARIANT=$v timeout 120 compute-sanitizer --tool racecheck --error-exitcode 3 "$BIN/test_ops" \
    --gtest_filter='PagedOpsTest.PrefillAndChunkedPrefill:OpsTest.AttentionDense' > "$logs/race_v$v.log" 2>&1
  echo "v$v racecheck rc=$? $(grep 'RACECHECK SUMMARY' "$logs/race_v$v.log")"
done

wait $prep
ls "$WORK/model"/*.safetensors > /dev/null 2>&1 || { echo "make_model failed"; tail -5 "$logs/model.log"; }
bench() {  # bench NAME [ENV=VALUE...]
  local name=$1; shift
  time_left "bench $name" || return
  env "$@" timeout 90 "$BIN/fovea" bench --model "$WORK/model" --images "$WORK/images" --backend cuda --count 96 \
    --gemm-seconds 0.5 --json "$logs/bench_$name.json" > "$logs/bench_$name.log" 2>&1
  echo "bench $name rc=$? $(python3 -c "
import json; d = json.load(open('$logs/bench_$name.json')); s = d['stages']
print(f\"qpm {d['qpm']:.1f} vit {s['vit']['ms_per_request']:.2f} llm {s['llm']['ms_per_request']:.2f} ms/request\")" 2>/dev/null)"
}
for setting in ${DECODES-default}; do
  run_setting decode "$setting"
  time_left "decode $name" || break
  env "${env_args[@]}" timeout 80 "$BIN/fovea" bench --model "$WORK/model" --images "$WORK/images" --backend cuda \
    --count 64 --max-tokens 256 --max-tiles 1 --warmup 0 --gemm-seconds 0.5 --json "$logs/decode_$name.json" \
    > "$logs/decode_$name.log" 2>&1
  echo "decode $name rc=$? $(python3 -c "import json; d=json.load(open('$logs/decode_$name.json'))['decode']; print(d.get('ms_per_step'), d.get('llm_ms_per_step'))" 2>/dev/null)"
done
for setting in ${BENCHES-default}; do
  run_setting bench "$setting"
  bench "$name" "${env_args[@]}"
done
tar czf "$out/logs.tar.gz" -C "$out" logs && rm -rf "$logs"
