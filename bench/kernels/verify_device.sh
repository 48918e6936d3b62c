#!/usr/bin/env bash
# One device call (~4 minutes) before a release run: the GPU tests of the staged binaries, then A/Bs of the
# settings that have switches, each measured once: attention configurations and decode split settings (op perf
# rows), the ViT per-tile timing, and on a random InternVL2-8B-shaped model the engine's official-tiling QPM
# (fovea bench, 96 requests: default, --cpu-normalize) and decode step (default, FOVEA_CUDA_DECODE_BALANCE=0).
# Run 10 (bench/results/cuda_ops_2026-11-29.md) also ran FOVEA_GEMM_TUNE_LARGE=0 against large-M GEMM tuning,
# which showed no gain and was removed. Binaries from .carry/bin (bench/gpu/final_call.sh --stage); carry .carry.
set -uo pipefail
BIN=${BIN:-.carry/bin}
out=${OUT:-out-verify}
logs=$out/logs
mkdir -p "$logs"
WORK=${WORK:-/tmp/fovea_verify}
mkdir -p "$WORK" /work && ln -sfn "$PWD" /work/main
passed() { grep -E '^\[  PASSED|^\[  FAILED' "$1" | tail -2 | tr '\n' ' '; }
for t in test_ops test_golden_forward test_runner; do
  timeout 90 "$BIN/$t" > "$logs/$t.log" 2>&1
  echo "$t rc=$? $(passed "$logs/$t.log")"
  grep -E "^\[  FAILED  \] [A-Za-z].*\(" "$logs/$t.log" | head -5
done
perf() {  # perf NAME [ENV=VALUE...]: the attention rows of OpsPerf
  local name=$1; shift
  env "$@" FOVEA_OPS_PERF=attention timeout 40 "$BIN/test_ops" --gtest_filter='OpsPerf.*' > "$logs/perf_$name.log" 2>&1
  grep -E " ms " "$logs/perf_$name.log" | sed "s/^/$name /"
}
perf default
perf attn31 FOVEA_CUDA_ATTN_VARIANT=31
perf attn32 FOVEA_CUDA_ATTN_VARIANT=32
perf unbalanced FOVEA_CUDA_DECODE_BALANCE=0
perf waves2 FOVEA_CUDA_DECODE_WAVES=2
perf waves4 FOVEA_CUDA_DECODE_WAVES=4
FOVEA_VIT_PERF=1 timeout 60 "$BIN/test_runner" --gtest_filter='VitPerf.*' > "$logs/vit_perf.log" 2>&1
grep "per tile" "$logs/vit_perf.log"
python3 bench/gpu/workload.py --photos .carry/photos --out "$WORK" --requests 96 > "$logs/workload.log" 2>&1
python3 bench/gpu/make_model.py --out "$WORK/model" --variant internlm2 \
  --tokenizer .carry/tokenizers/internlm2/tokenizer.model --template internlm2-chat --std 0.02 \
  > "$logs/model.log" 2>&1 || { echo "make_model failed"; tail -5 "$logs/model.log"; }
bench() {  # bench NAME SHAPE_ARGS... -- [ENV=VALUE...]
  local name=$1; shift
  local args=()
  while [ "$1" != -- ]; do args+=("$1"); shift; done
  shift
  env "$@" timeout 80 "$BIN/fovea" bench --model "$WORK/model" --images "$WORK/images" --backend cuda \
    --gemm-seconds 0.5 --json "$logs/bench_$name.json" "${args[@]}" > "$logs/bench_$name.log" 2>&1
  echo "bench $name rc=$? $(python3 -c "
import json; d = json.load(open('$logs/bench_$name.json'))
dec = d.get('decode') or {}
print('qpm %.1f vit %.3f ms/tile llm %.1f ms/req' % (d['qpm'], d['stages']['vit']['ms_per_request'] / d['tiles_per_request'],
      d['stages']['llm']['ms_per_request']), ('decode %.2f ms/step' % dec['ms_per_step']) if dec else '')" 2>&1 | tail -1)"
}
bench official --count 96 --
bench official_cpu_normalize --count 96 --cpu-normalize --
bench decode --count 64 --max-tokens 256 --max-tiles 1 --warmup 0 --
bench decode_unbalanced --count 64 --max-tokens 256 --max-tiles 1 --warmup 0 -- FOVEA_CUDA_DECODE_BALANCE=0
tar czf "$out/logs.tar.gz" -C "$out" logs && rm -rf "$logs"
