#!/usr/bin/env bash
# Issue 22's loading checks on one H200 (one device call, ~8 min): fill_random bit-exactness (test_ops), the
# memory plans of an InternVL2-8B-shaped and an InternVL2.5/3-78B-LLM-shaped config (Qwen2.5-72B + the 300M ViT;
# the 6B ViT comes with the family-models branch), --load-format dummy benches (8B bf16, 72B FP8 and 4-bit) with
# their start-up memory lines and the host's peak RSS, and the refusal of the 72B in bf16.
#   FOVEA_BIN=build/fovea TEST_OPS=build/tests/backend/test_ops PHOTOS=DIR TOKENIZERS=DIR bench/gpu/dummy_load_check.sh
# TOKENIZERS holds internlm2/tokenizer.model and qwen2/{vocab.json,merges.txt,...} (shared/data/tokenizers).
set -uo pipefail
cd "$(dirname "$0")/../.."
FOVEA=${FOVEA_BIN:-build/fovea}
TEST_OPS=${TEST_OPS:-build/tests/backend/test_ops}
PHOTOS=${PHOTOS:-shared/data/photos}
TOKENIZERS=${TOKENIZERS:-shared/data/tokenizers}
OUT=${OUT:-$PWD/out/dummy_load}
WORK=${WORK:-/tmp/fovea_dummy}
mkdir -p "$OUT" "$WORK"
log() { echo "== $(date +%T) $*"; }

log "test_ops: fill_random, CUDA vs CPU bit for bit"
"$TEST_OPS" --gtest_filter='*FillRandom*' 2>&1 | tail -4

python3 bench/gpu/make_model.py --out "$WORK/i8" --variant internlm2 --config-only \
  --tokenizer "$TOKENIZERS/internlm2/tokenizer.model"
python3 bench/gpu/make_model.py --out "$WORK/q72" --variant qwen2 --size 72b --config-only \
  --tokenizer "$TOKENIZERS/qwen2"

for model in i8 q72; do
  log "plan $model (an H200 by default)"
  "$FOVEA" inspect --model "$WORK/$model" --plan
done

# One bench: the start-up memory line, the table, and the peak host RSS (GNU time's maxresident, KB).
bench() {
  local name=$1 model=$2
  shift 2
  log "bench $name"
  local timer=()
  [ -x /usr/bin/time ] && timer=(/usr/bin/time -f "host peak RSS %M KB")
  "${timer[@]}" "$FOVEA" bench --model "$WORK/$model" --photos "$PHOTOS" --count 96 \
    --backend cuda --load-format dummy --json "$OUT/$name.json" --svg "$OUT/$name.svg" "$@" 2>&1 |
    grep -E "memory:|W4A16|QPM|MFU|host peak|error|fit" | tee "$OUT/$name.txt"
}
bench dummy_8b_bf16 i8
bench dummy_72b_fp8 q72 --quantization fp8
bench dummy_72b_w4a16 q72 --quantization w4a16
log "72B in bf16: refused before loading, with what would fit"
"$FOVEA" bench --model "$WORK/q72" --photos "$PHOTOS" --count 8 --backend cuda --load-format dummy 2>&1 | tail -6
