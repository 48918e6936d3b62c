#!/usr/bin/env bash
# One device call (~8 minutes: run it alone, timeout_s=600) for the FP8 scaling recipes (backend/fp8_recipe.h).
# Builds nothing: the sm_90a binaries (FOVEA_STATIC) come from .carry/bin (bench/gpu/final_call.sh --stage);
# carry .carry.
#   1. test_ops' FP8 cases (CUDA linear_fp8_scaled against the CPU reference: per tensor, per channel x per token,
#      128-blocks; cuBLASLt's SCALAR / OUTER_VEC / VEC128 x BLK128x128 scale modes), raw gtest XML kept;
#   2. OpsPerf's prefill rows (FOVEA_OPS_PERF=prefill): `llm fp8 [channel|block]` (FP8 GEMM + activation
#      quantization at M = 8192) for each recipe beside bf16;
#   3. fovea bench, listing-photo workload, official tiling, 96 requests: --quantization fp8-tensor, fp8-channel
#      (the default, `fp8`) and fp8-block: QPM, the FP8 FLOP floor of the same call (its GEMM peak), the ratio;
#   4. batch invariance on the GPU: the first 16 workload requests run one at a time (--concurrency 1) and all
#      together, with fp8-tensor and fp8-channel: how many first tokens agree, how many logit rows are
#      bit-identical, and the largest first-token logit difference.
# FP8_BENCH="..." picks other --quantization values for step 3 (e.g. "none fp8-channel"); FP8_INVARIANCE=0 skips
# step 4, FP8_INVARIANCE_RECIPES="..." picks its recipes.
set -uo pipefail
source "$(dirname "$0")/device_common.sh"
device_dirs fp8_recipes
start_model_and_workload
timeout 120 "$BIN/test_ops" --gtest_filter='OpsTest.LinearFp8*:CpuFp8.*' --gtest_output="xml:$out/test_ops_fp8.xml" \
  > "$logs/test_ops_fp8.log" 2>&1
echo "test_ops fp8 rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$logs/test_ops_fp8.log" | tr '\n' ' ')"
grep -E "^\[  FAILED  \]|Failure|exception|cuBLASLt|normalised" "$logs/test_ops_fp8.log" | grep -v ", where" | head -16
# The 1x128 activation scales' token stride: padded to 4 by default; if the block cases fail, try it unpadded.
if grep -q "FAILED  \] OpsTest.LinearFp8Recipes" "$logs/test_ops_fp8.log"; then
  FOVEA_FP8_BLOCK_SCALE_LD=exact timeout 120 "$BIN/test_ops" --gtest_filter='OpsTest.LinearFp8Recipes' \
    > "$logs/test_ops_fp8_exact_ld.log" 2>&1
  echo "test_ops fp8 with FOVEA_FP8_BLOCK_SCALE_LD=exact rc=$? $(grep -cE 'Failure' "$logs/test_ops_fp8_exact_ld.log") failures"
fi
FOVEA_OPS_PERF=prefill timeout 100 "$BIN/test_ops" --gtest_filter='OpsPerf.*' > "$logs/perf.log" 2>&1
echo "perf rc=$?"
grep -E "llm (fp8 )?(tensor |channel |block )?(wqkv|w13|w2)" "$logs/perf.log"
wait $prep
for q in ${FP8_BENCH:-fp8-tensor fp8-channel fp8-block}; do
  timeout 110 "$BIN/fovea" bench --model "$WORK/model" --images "$WORK/images" --backend cuda --count 96 \
    --gemm-seconds 0.5 --quantization $q --json "$logs/bench_$q.json" > "$logs/bench_$q.log" 2>&1
  echo "bench $q rc=$? $(python3 -c "import json; d=json.load(open('$logs/bench_$q.json')); s=d['stages']; print('%.1f QPM, floor %.1f QPM (%.3f), gemm peak %.0f TFLOP/s, llm %.1f ms/req' % (d['qpm'], d['flop_floor_qpm'], d['fraction_of_floor'], d['gemm_peak']['tflops'], s['llm']['ms_per_request']))" 2>/dev/null)"
  grep -m2 -i "error" "$logs/bench_$q.log"
done
if [ "${FP8_INVARIANCE:-1}" != 0 ]; then
  head -16 "$WORK/tasks.jsonl" > "$WORK/tasks16.jsonl"
  for q in ${FP8_INVARIANCE_RECIPES:-fp8-tensor fp8-channel}; do
    for c in 1 64; do
      rm -f "$logs/inv_${q}_$c".*
      timeout 100 "$BIN/fovea" run --model "$WORK/model" --input "$WORK/tasks16.jsonl" --output "$logs/inv_${q}_$c.jsonl" \
        --backend cuda --quantization $q --concurrency $c --quiet --dump-logits "$logs/inv_${q}_$c" \
        > "$logs/inv_${q}_$c.log" 2>&1 || echo "invariance $q concurrency $c failed: $(tail -2 "$logs/inv_${q}_$c.log")"
    done
    python3 - "$logs/inv_${q}_1" "$logs/inv_${q}_64" "$q" <<'PY'
import json, sys
import numpy as np
def load(p):
    index = json.load(open(p + ".json"))
    data = np.fromfile(p + ".f32", dtype="<f4").reshape(-1, index["vocab"])
    return {k: data[r] for k, r in index["rows"].items()}
try:
    alone, mixed = load(sys.argv[1]), load(sys.argv[2])
    ids = sorted(set(alone) & set(mixed))
    same = sum(int(alone[i].argmax() == mixed[i].argmax()) for i in ids)
    bits = sum(int(np.array_equal(alone[i].view(np.int32), mixed[i].view(np.int32))) for i in ids)
    diff = max(float(np.abs(alone[i] - mixed[i]).max()) for i in ids)
    print(f"invariance {sys.argv[3]}: first tokens alone = in a batch {same}/{len(ids)}, logits bit-identical "
          f"{bits}/{len(ids)}, max |diff| {diff:.4f}")
except Exception as e:
    print(f"invariance {sys.argv[3]}: no comparison ({e})")
PY
  done
fi
tar czf "$out/logs.tar.gz" -C "$out" logs && rm -rf "$logs"
