#!/usr/bin/env bash
# Session 2026-12-07 (12) call 1: FlashAttention-3's warpgroup ping-pong ("turns") in the pipelined wgmma
# attention. Binaries (.carry/bin/bins12a.tar.xz): *-base = main (66d12ab); fovea-new / test_ops-new /
# test_golden_forward-new = the tree with turns in the head-dim-128 prefill config (Pipe47), the ViT's Pipe44
# unchanged; test_ops-PipeVit2 / -PipeVit3s = the same with the head-dim-64 (ViT) config replaced by 2 warpgroups x
# 128-key tiles or 3 x 64, both taking turns (3 x 128 left out: at 128 registers ptxas waits on every wgmma). Stages: the new binaries' tests (the ViT
# variants: their attention tests), the attention microbenchmark of every variant twice (alternating), the
# end-to-end A/B of base vs new (bf16 and FP8, one round); on an H200 then issue 22's rows over 80 GB.
source "$(dirname "$0")/../../bench/gpu/call_common.sh"
call_begin s12call1 .carry/bin/bins12a.tar.xz
call_test_new
for v in PipeVit2 PipeVit3s; do
  timeout -k 5 60 "$B/test_ops-$v" --gtest_filter='OpsTest.AttentionDense*:PagedOpsTest.*' > "$R/test_ops-$v.txt" 2>&1
  echo "test_ops-$v attention rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$R/test_ops-$v.txt" | tr '\n' ' ')"
done
save
call_perf attention "base new PipeVit2 PipeVit3s"
for f in "$R"/perf_attention-*.txt; do mv "$f" "${f%.txt}-1.txt"; done
call_perf attention "base new PipeVit2 PipeVit3s"
if [ "${GPU_MIB:-0}" -gt 100000 ]; then
  DEADLINE=$(( ${DEADLINE:-550} - 250 )) call_ab 1 InternVL2-8B:none InternVL2-8B:fp8
  fam=fovea-base; [ -n "$NEW" ] && fam=fovea-new
  call_family_h200 $fam internvl3-38b,internvl3-78b-fp8 $(( $(left) - 20 ))
else
  call_ab 2 InternVL2-8B:none InternVL2-8B:fp8
fi
save
