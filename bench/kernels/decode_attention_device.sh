#!/usr/bin/env bash
# One device call for the split-KV decode kernel (src/backend/cuda/attention_decode.cuh), at most ~3 minutes:
# the paged-attention and graph-replay checks with the new kernel and with FOVEA_CUDA_DECODE_KERNEL=old, the
# attention perf rows for both (and the 2- and 8-warp variants if time is left), compute-sanitizer memcheck and
# racecheck on the decode cases, then a table of the decode rows: case, old GB/s, new GB/s.
# Usage, from the repo root: bench/kernels/decode_attention_device.sh <builddir>   (logs: $OUT/decode_attn_*.log)
set -uo pipefail
build=${1:?usage: decode_attention_device.sh <builddir>}
bin="$build/tests/backend/test_ops"
[ -x "$bin" ] || { echo "no test binary at $bin"; exit 2; }
out=${OUT:-out-decode-attn}
mkdir -p "$out"
summary="$out/decode_attn_summary.log"
: > "$summary"
start=$SECONDS

# 1. Correctness, new kernel then the general one.
for kernel in new old; do
  FOVEA_CUDA_DECODE_KERNEL=$kernel timeout 50 "$bin" --gtest_filter='PagedOpsTest.*:OpsTest.GraphReplay*' \
    > "$out/decode_attn_tests_$kernel.log" 2>&1
  echo "tests $kernel rc=$? $(grep -cE '^\[       OK \]' "$out/decode_attn_tests_$kernel.log") ok," \
    "$(grep -cE '^\[  FAILED  \] [A-Za-z].* \(' "$out/decode_attn_tests_$kernel.log") failed" >> "$summary"
done

# 2. Perf: the attention rows of OpsPerf, per kernel.
perf() {
  FOVEA_CUDA_DECODE_KERNEL=$1 FOVEA_OPS_PERF=attention timeout 40 "$bin" --gtest_filter='OpsPerf.*' \
    > "$out/decode_attn_perf_$1.log" 2>&1
  echo "perf $1 rc=$?" >> "$summary"
}
perf new
perf old
for kernel in w2 w8; do
  [ $((SECONDS - start)) -lt 90 ] && perf $kernel
done

# 3. compute-sanitizer on the decode cases (new kernel), if installed.
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ -n "$sanitizer" ]; then
  decode_cases='PagedOpsTest.DecodeBatch:PagedOpsTest.DecodeInternVlShapeMixedContexts:PagedOpsTest.DecodeShortChunks'
  timeout 45 "$sanitizer" --tool memcheck --error-exitcode 3 "$bin" \
    --gtest_filter="$decode_cases:PagedOpsTest.DecodeBlockSizesAndTableEntriesPastCache:PagedOpsTest.DecodeOneSplit" \
    > "$out/decode_attn_memcheck.log" 2>&1
  echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$out/decode_attn_memcheck.log" | tail -1)" >> "$summary"
  timeout 45 "$sanitizer" --tool racecheck --error-exitcode 3 "$bin" --gtest_filter="$decode_cases" \
    > "$out/decode_attn_racecheck.log" 2>&1
  echo "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY' "$out/decode_attn_racecheck.log" | tail -1)" >> "$summary"
else
  echo "compute-sanitizer: not found" >> "$summary"
fi

# Failures in detail, then the table.
for kernel in new old; do
  grep -E "Failure|normalised|unwritten|^\[  FAILED  \]" "$out/decode_attn_tests_$kernel.log" | head -12 |
    sed "s/^/[$kernel] /"
done
cat "$summary"
echo "elapsed ${SECONDS}s"
# A perf row: the name in the first 44 columns, then "<ms> ms <rate> GB/s". Prints "name<TAB>GB/s" per row.
rates() { [ -f "$1" ] && awk '/^paged decode/ { name = substr($0, 1, 44); sub(/ +$/, "", name);
  for (i = 1; i <= NF; ++i) if ($i == "GB/s") print name "\t" $(i - 1) }' "$1"; }
printf '%-44s %9s %9s %9s %9s\n' "case" "old GB/s" "new GB/s" "w2 GB/s" "w8 GB/s"
rates "$out/decode_attn_perf_old.log" | while IFS=$'\t' read -r name old; do
  col() { rates "$out/decode_attn_perf_$1.log" | awk -F'\t' -v n="$name" '$1 == n { print $2 }'; }
  printf '%-44s %9s %9s %9s %9s\n' "$name" "$old" "$(col new)" "$(col w2)" "$(col w8)"
done
