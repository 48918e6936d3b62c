#!/usr/bin/env bash
# One device call (~8 minutes) for W4A16 (linear_w4, src/backend/cuda/gemm_w4.*) and the session's other GPU-side
# changes: (1) test_ops, all of it (the OpsW4Test cases among them); (2) the W4 op timings (FOVEA_OPS_PERF=w4);
# (3) an AWQ copy of the random
# InternVL2-8B-shaped model (bench/gpu/make_w4_checkpoint.py, group 128), then the decode benchmark (64 x 256
# tokens, 1 tile) on the bf16 model, on the AWQ copy with --w4 packed and with --w4 dequantize, and first-token
# logits of 96 listing-photo requests, packed against dequantize (the same weights in bf16: only the GEMMs'
# summation order differs); (4) test_golden_forward and test_runner. OPS=0 skips (1), (2) and (4). Binaries from
# .carry/bin; carry .carry. Logs under $OUT (logs.tar.gz); summary lines on stdout.
set -uo pipefail
source "$(dirname "$0")/device_common.sh"
device_dirs w4
start_model_and_workload
summary() { echo "$1 rc=$2 $(grep -E '^\[  (PASSED|FAILED)' "$3" | tr '\n' ' ')"; }

OPS=${OPS:-1}
[ "$OPS" = 1 ] && timeout 200 "$BIN/test_ops" > "$logs/test_ops.log" 2>&1
[ "$OPS" = 1 ] && summary test_ops $? "$logs/test_ops.log"
[ "$OPS" = 1 ] && grep -E "^\[  FAILED  \] [A-Za-z].*\(" "$logs/test_ops.log" | head -10
if [ "$OPS" = 1 ]; then
  FOVEA_OPS_PERF=w4 timeout 90 "$BIN/test_ops" --gtest_filter='OpsPerf.*' > "$logs/perf_w4.log" 2>&1
  echo "w4 perf rc=$?"
  grep -E "^(w4|bf16)" "$logs/perf_w4.log" | head -90
fi

wait $prep
start=$SECONDS
timeout 300 python3 bench/gpu/make_w4_checkpoint.py --model "$WORK/model" --out "$WORK/model_awq" \
  > "$logs/make_w4.log" 2>&1
echo "make_w4_checkpoint rc=$? $((SECONDS - start)) s; $(du -sh "$WORK/model_awq" 2>/dev/null | cut -f1)"

decode() {  # decode NAME MODEL [fovea bench args ...]: decode_bench, then the start-up lines on memory and W4A16
  decode_bench "$@"
  grep -E "W4A16|memory:" "$logs/decode_$1.log" | head -2
}
[ "$OPS" = 1 ] && decode bf16 "$WORK/model"
decode w4_packed "$WORK/model_awq" --w4 packed
decode w4_dequantize "$WORK/model_awq" --w4 dequantize

for mode in packed dequantize; do
  timeout 120 "$BIN/fovea" run --model "$WORK/model_awq" --input "$WORK/tasks.jsonl" --output "$WORK/w4_$mode.jsonl" \
    --backend cuda --w4 $mode --dump-logits "$WORK/fovea_w4_${mode}_logits" > "$logs/run_w4_$mode.log" 2>&1
  echo "run w4 $mode rc=$? $(grep -E 'QPM|qpm' "$logs/run_w4_$mode.log" | tail -1)"
done
python3 - "$WORK" <<'EOF' 2>&1 | tee "$logs/w4_logits.txt"
import sys
import numpy as np
sys.path.insert(0, "bench/gpu")
import compare
work = sys.argv[1]
p, d = compare.load_fovea_logits(work, "w4_packed"), compare.load_fovea_logits(work, "w4_dequantize")
if p is None or d is None:
    sys.exit("w4 logits: a dump is missing")
common = sorted(set(map(str, p["ids"])) & set(map(str, d["ids"])))
pi = {str(i): k for k, i in enumerate(p["ids"])}
di = {str(i): k for k, i in enumerate(d["ids"])}
a = np.stack([p["logits"][pi[i]] for i in common]).astype(np.float64)
b = np.stack([d["logits"][di[i]] for i in common]).astype(np.float64)
rel = np.linalg.norm(a - b, axis=1) / np.maximum(np.linalg.norm(b, axis=1), 1e-30)
same = int((a.argmax(1) == b.argmax(1)).sum())
print(f"w4 packed vs dequantize: {len(common)} requests, first token equal {same}/{len(common)}, "
      f"logits rel err mean {rel.mean():.2e} max {rel.max():.2e}")
EOF

for t in $([ "$OPS" = 1 ] && echo test_golden_forward test_runner); do
  timeout 120 "$BIN/$t" > "$logs/$t.log" 2>&1
  summary "$t" $? "$logs/$t.log"
done
tar czf "$out/logs.tar.gz" -C "$out" logs && rm -rf "$logs"
