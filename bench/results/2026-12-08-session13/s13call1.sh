#!/usr/bin/env bash
# Session 2026-12-08 (13) call 1. Binaries (.carry/bin/bins13b.tar.xz), all built here for sm_90a:
#   fovea-base / test_ops-base: main at the session's start (3b84894; src/ as 66d12ab)
#   fovea-new / test_ops-new / test_golden_forward-new: branch gpu-pending-s13 (15a60db): the persistent pipelined
#     attention grid + silu_mul_fp8 with the row in registers (4 chunks of 8 a thread)
#   fovea-silu / test_ops-silu4 / test_golden_forward-silu: the silu_mul_fp8 change alone (fallback)
#   test_ops-silu2 / -silu8: silu_mul_fp8 with 2 / 8 chunks a thread (no attention change)
#   fovea-PipeVit2 / -PipeVit3s, test_ops-PipeVit2 / -PipeVit3s: 138f29f's head-dim-64 candidates (turns)
source "$(dirname "$0")/../../bench/gpu/call_common.sh"
call_begin s13call1 .carry/bin/bins13b.tar.xz
timeout -k 5 60 "$B/test_ops-new" --gtest_filter='OpsTest.AttentionDense*:PagedOpsTest.*' > "$R/test_ops_attention-new.txt" 2>&1
rc=$?; P=""; [ $rc = 0 ] && P="new"  # the persistent kernels, only if they neither failed nor hung
echo "persistent attention tests rc=$rc $(grep -E '^\[  (PASSED|FAILED) ' "$R/test_ops_attention-new.txt" | tr '\n' ' ')"
save
if [ -z "$P" ] || ! call_test_new; then
  echo "new failed: the silu_mul_fp8 change alone"
  mv "$R/test_ops.txt" "$R/test_ops-new-full.txt" 2>/dev/null
  mv "$R/test_golden_forward.txt" "$R/test_golden_forward-new.txt" 2>/dev/null
  timeout -k 5 150 "$B/test_ops-silu4" > "$R/test_ops.txt" 2>&1; a=$?
  timeout -k 5 120 "$B/test_golden_forward-silu" > "$R/test_golden_forward.txt" 2>&1; b=$?
  echo "silu alone: test_ops rc=$a goldens rc=$b"
  [ $a = 0 ] && [ $b = 0 ] && NEW=$B/fovea-silu
  save
fi
call_perf attention "base $P PipeVit2 PipeVit3s"
for f in "$R"/perf_attention-*.txt; do mv "$f" "${f%.txt}-r1.txt"; done
call_perf prefill "base silu4 silu2 silu8"
grep -h "silu_mul_fp8" "$R"/perf_prefill-*.txt
call_ab 2 InternVL2-8B:none InternVL2-8B:fp8
vits="base:none PipeVit2:none PipeVit3s:none"; [ -n "$P" ] && vits="base:none new:none PipeVit2:none PipeVit3s:none"
call_vit_ab 1 "$vits"
call_perf attention "PipeVit3s PipeVit2 $P base"
save
