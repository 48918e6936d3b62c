#!/usr/bin/env bash
# Session 2026-12-07 (12) call 2: call 1's two head-dim-64 (ViT) candidates again, now that the backend raises
# their shared-memory limit (call 1's launches failed with "invalid argument": set_wgmma_limit still named Pipe44).
# Binaries (.carry/bin/bins12b.tar.xz): test_ops-base = main (66d12ab); test_ops-PipeVit2 / -PipeVit3s = turns in
# the prefill config plus the ViT config 2 warpgroups x 128-key tiles / 3 x 64-key tiles, both taking turns.
source "$(dirname "$0")/../../bench/gpu/call_common.sh"
call_begin s12call2 .carry/bin/bins12b.tar.xz
for v in PipeVit2 PipeVit3s; do
  timeout -k 5 60 "$B/test_ops-$v" --gtest_filter='OpsTest.AttentionDense*:PagedOpsTest.*' > "$R/test_ops-$v.txt" 2>&1
  echo "test_ops-$v attention rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$R/test_ops-$v.txt" | tr '\n' ' ')"
done
save
NEW=x call_perf attention "base PipeVit2 PipeVit3s"
for f in "$R"/perf_attention-*.txt; do mv "$f" "${f%.txt}-1.txt"; done
NEW=x call_perf attention "base PipeVit2 PipeVit3s"
save
