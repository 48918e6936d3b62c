#!/usr/bin/env bash
# One device call (~7 minutes) for the skinny decode GEMM: bench/kernels/skinny_device.sh (op tests, sanitizers,
# skinny vs cuBLASLt per shape and split count), test_golden_forward with FOVEA_CUDA_SKINNY_GEMM=1 (graph decode
# through the kernel), then the decode benchmark (64 x 256 tokens, CUDA graphs) with the kernel on
# (FOVEA_CUDA_SKINNY_GEMM=1), off (the default) and on again (run-to-run spread). Session 4 ran it when the
# kernel was still on by default (settings then: on, off:FOVEA_CUDA_SKINNY_GEMM=0, on2). Binaries from
# .carry/bin; carry .carry. Logs under $OUT.
set -uo pipefail
source "$(dirname "$0")/device_common.sh"
device_dirs skinny
start_model_and_workload
OUT=$out bash "$(dirname "$0")/skinny_device.sh" "$BIN"
FOVEA_CUDA_SKINNY_GEMM=1 timeout 120 "$BIN/test_golden_forward" > "$logs/golden.log" 2>&1
echo "golden rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$logs/golden.log" | tr '\n' ' ')"
wait $prep
for setting in on:FOVEA_CUDA_SKINNY_GEMM=1 off; do
  name=${setting%%:*}; env_args=(); [ "$name" != "$setting" ] && env_args=("${setting#*:}")
  env "${env_args[@]}" timeout 80 "$BIN/fovea" bench --model "$WORK/model" --images "$WORK/images" --backend cuda \
    --count 64 --max-tokens 256 --max-tiles 1 --warmup 0 --gemm-seconds 0.5 --json "$logs/decode_$name.json" \
    > "$logs/decode_$name.log" 2>&1
  echo "decode $name rc=$? $(python3 -c "import json; d=json.load(open('$logs/decode_$name.json'))['decode']; print('%.3f ms/step (runner %.3f)' % (d['ms_per_step'], d.get('llm_ms_per_step') or 0))" 2>/dev/null)"
done
tar czf "$out/logs.tar.gz" -C "$out" logs && rm -rf "$logs"
