#!/usr/bin/env bash
# Round-4 device call (one run): op correctness (test_ops, all), the golden forward (CPU and CUDA cases, incl.
# the InternLM2 goldens with head_dim 12), each candidate flash-attention variant's attention tests, memcheck and
# racecheck on the attention/KV ops, and the attention perf mode per variant. Expects binaries built here:
#   cmake -S . -B build-attn -G Ninja -DCMAKE_BUILD_TYPE=Release -DFOVEA_STATIC=ON -DCMAKE_CUDA_ARCHITECTURES=90a
#   cmake --build build-attn --target test_ops test_golden_forward
# and FOVEA_SOURCE_DIR (the goldens' root, compiled in) to resolve on the device: start the command with
#   mkdir -p /work && ln -sfn "$PWD" /work/main
set -uo pipefail
build=${1:-build-attn}
ops=$build/tests/backend/test_ops
golden=$build/tests/runtime/test_golden_forward
out=${OUT:-out-r4}
mkdir -p "$out"
sum="$out/summary.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$sum" 2>&1
timeout 80 "$ops" --gtest_repeat=2 > "$out/test_ops.log" 2>&1
echo "test_ops (default, repeat 2) rc=$?" >> "$sum"
timeout 40 "$golden" > "$out/golden.log" 2>&1
echo "test_golden_forward rc=$?" >> "$sum"
attn_filter='OpsTest.AttentionDense:PagedOpsTest.*:OpsTest.GraphReplayMatchesDirectCalls'
for v in 6 7; do
  FOVEA_CUDA_ATTN_VARIANT=$v timeout 30 "$ops" --gtest_repeat=2 --gtest_filter="$attn_filter" > "$out/tmp.log" 2>&1
  echo "variant $v attention tests rc=$?" >> "$sum"
  grep -E "Failure|normalised|unwritten|FAILED" "$out/tmp.log" | head -10 >> "$sum"
done
for v in 0 3 6 7; do
  FOVEA_CUDA_ATTN_VARIANT=$v FOVEA_OPS_PERF=attention timeout 25 "$ops" --gtest_filter='OpsPerf.*' > "$out/tmp.log" 2>&1
  grep -E " ms " "$out/tmp.log" | sed "s/^/v$v /" >> "$out/perf.log"
done
rm -f "$out/tmp.log"
if command -v compute-sanitizer > /dev/null; then
  timeout 45 compute-sanitizer --tool memcheck --error-exitcode 3 "$ops" \
    --gtest_filter='PagedOpsTest.*:OpsTest.RopeAndKvWrite:OpsTest.AttentionDense' > "$out/memcheck.log" 2>&1
  echo "memcheck rc=$? $(tail -1 "$out/memcheck.log")" >> "$sum"
  FOVEA_CUDA_ATTN_VARIANT=6 timeout 45 compute-sanitizer --tool racecheck --error-exitcode 3 "$ops" \
    --gtest_filter='PagedOpsTest.PrefillAndChunkedPrefill:OpsTest.AttentionDense' > "$out/racecheck.log" 2>&1
  echo "racecheck v6 rc=$? $(grep 'RACECHECK SUMMARY' "$out/racecheck.log")" >> "$sum"
fi
cat "$sum"
grep -E "^\[  (FAILED|PASSED|SKIPPED) " "$out/test_ops.log" "$out/golden.log" | sort | uniq -c
grep -E "Failure|normalised|unwritten" "$out/test_ops.log" "$out/golden.log" | head -20
cat "$out/perf.log"
