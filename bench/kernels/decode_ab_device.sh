#!/usr/bin/env bash
# One device call (~4 minutes): correctness of the current CUDA binaries (test_ops, test_golden_forward), the op
# perf rows (incl. rope and the LM-head shapes) with FOVEA_GEMM_SPLIT_N on and off, then the engine's decode
# step (fovea bench, 64 one-tile requests x 256 tokens, CUDA graphs, run_all.sh's decode shape) on a random
# InternVL2-8B-shaped model under several settings: default, decode-attention waves 4 and 8, the pre-split
# decode kernel (FOVEA_CUDA_DECODE_KERNEL=old), and FOVEA_GEMM_SPLIT_N=0. Binaries from .carry/bin
# (bench/gpu/final_call.sh --stage); carry .carry. Logs under $OUT (tarred, so they all come back).
set -uo pipefail
BIN=${BIN:-.carry/bin}
out=${OUT:-out-decode-ab}
mkdir -p "$out/logs" && logs=$out/logs
WORK=${WORK:-/tmp/fovea_ab}
mkdir -p "$WORK" /work && ln -sfn "$PWD" /work/main
passed() { grep -E '^\[  PASSED|^\[  FAILED' "$1" | tail -2 | tr '\n' ' '; }
timeout 60 "$BIN/test_ops" > "$logs/test_ops.log" 2>&1; echo "test_ops rc=$? $(passed "$logs/test_ops.log")"
timeout 60 "$BIN/test_golden_forward" > "$logs/golden.log" 2>&1; echo "golden rc=$? $(passed "$logs/golden.log")"
for split in 1 0; do
  FOVEA_GEMM_SPLIT_N=$split FOVEA_OPS_PERF=1 timeout 60 "$BIN/test_ops" --gtest_filter='OpsPerf.*' \
    > "$logs/perf_split$split.log" 2>&1
  grep -E "lm_head|rope|decode w|paged decode" "$logs/perf_split$split.log" | sed "s/^/split_n=$split /"
done
python3 bench/gpu/workload.py --photos .carry/photos --out "$WORK" --requests 64 > "$logs/workload.log" 2>&1
python3 bench/gpu/make_model.py --out "$WORK/model" --variant internlm2 \
  --tokenizer .carry/tokenizers/internlm2/tokenizer.model --template internlm2-chat --std 0.02 \
  > "$logs/model.log" 2>&1 || { echo "make_model failed"; tail -5 "$logs/model.log"; }
decode() {  # decode NAME [ENV=VALUE...]
  local name=$1; shift
  env "$@" timeout 80 "$BIN/fovea" bench --model "$WORK/model" --images "$WORK/images" --backend cuda --count 64 \
    --max-tokens 256 --max-tiles 1 --warmup 0 --gemm-seconds 0.5 --json "$logs/decode_$name.json" \
    > "$logs/decode_$name.log" 2>&1
  echo "decode $name rc=$? $(python3 -c "import json; d=json.load(open('$logs/decode_$name.json'))['decode']; print(d.get('ms_per_step'), d.get('llm_ms_per_step'))" 2>/dev/null)"
}
decode default
decode waves4 FOVEA_CUDA_DECODE_WAVES=4
decode waves8 FOVEA_CUDA_DECODE_WAVES=8
decode old_kernel FOVEA_CUDA_DECODE_KERNEL=old
decode no_split_n FOVEA_GEMM_SPLIT_N=0
tar czf "$out/logs.tar.gz" -C "$out" logs && rm -rf "$logs"
