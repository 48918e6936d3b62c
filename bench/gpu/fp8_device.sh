#!/usr/bin/env bash
# One device call (~4 minutes) for the FP8 W8A8 path (first run 2026-11-29; recipes: fp8_recipes_device.sh):
#   1. test_ops' LinearFp8 (CUDA linear_fp8 against the CPU reference) and the rest of test_ops;
#   2. OpsPerf's `llm fp8` rows (FP8 GEMM + activation quantization at M = 8192) beside the bf16 rows;
#   3. fovea bench, official tiling, 96 requests: bf16, --quantization fp8 (LLM) and fp8-all (+ ViT) (QPM,
#      ViT ms per tile),
#      and the decode benchmark in fp8.
# The first-token agreement of fp8 with transformers bf16 comes from run_all.sh with
# FOVEA_FP8_ARGS="--quantization fp8" (its fovea_fp8 step). Binaries from .carry/bin; carry .carry.
set -uo pipefail
source "$(dirname "$0")/device_common.sh"
device_dirs fp8
start_model_and_workload
timeout 90 "$BIN/test_ops" > "$logs/test_ops.log" 2>&1
echo "test_ops rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$logs/test_ops.log" | tr '\n' ' ')"
grep -E "^\[  FAILED  \]|LinearFp8|Failure|exception" "$logs/test_ops.log" | grep -v ", where" | head -12
FOVEA_OPS_PERF=1 timeout 90 "$BIN/test_ops" --gtest_filter='OpsPerf.*' > "$logs/perf.log" 2>&1
grep -E "llm (fp8 )?(wqkv|w13|w2)" "$logs/perf.log"
wait $prep
for q in none fp8 fp8-all; do
  timeout 90 "$BIN/fovea" bench --model "$WORK/model" --images "$WORK/images" --backend cuda --count 96 \
    --gemm-seconds 0.5 --quantization $q --json "$logs/bench_$q.json" > "$logs/bench_$q.log" 2>&1
  echo "bench $q rc=$? $(python3 -c "import json; d=json.load(open('$logs/bench_$q.json')); s=d['stages']; print('%.1f QPM, llm %.1f ms/req, vit %.3f ms/tile, gemm peak %.0f' % (d['qpm'], s['llm']['ms_per_request'], s['vit']['ms_per_request'] / d['tiles_per_request'], d['gemm_peak']['tflops']))" 2>/dev/null)"
  grep -m2 "error" "$logs/bench_$q.log"
done
timeout 80 "$BIN/fovea" bench --model "$WORK/model" --images "$WORK/images" --backend cuda --count 64 --max-tokens 256 \
  --max-tiles 1 --warmup 0 --gemm-seconds 0.5 --quantization fp8 --json "$logs/decode_fp8.json" > "$logs/decode_fp8.log" 2>&1
echo "decode fp8 rc=$? $(python3 -c "import json; d=json.load(open('$logs/decode_fp8.json'))['decode']; print(d.get('ms_per_step'))" 2>/dev/null) ms/step"
tar czf "$out/logs.tar.gz" -C "$out" logs && rm -rf "$logs"
