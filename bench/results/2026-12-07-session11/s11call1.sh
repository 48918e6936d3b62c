#!/usr/bin/env bash
# Session 2026-12-07 (11) call 1: main (b7a278b) against the vectorized rope + KV write and the silu_mul_fp8 whose
# loads are batched, on bench/gpu/call_common.sh's stages: the new binary's test_ops and CUDA goldens, the op
# microbenchmarks of the LLM's prefill (new entries: rope_kv_write, silu_mul_fp8, add_rms_norm_fp8), the end-to-end
# A/B (bf16 and FP8, two rounds), then 4 and 16 questions per photo with both binaries; on an H200 only, issue
# 22's rows that need more than 80 GB. Binaries (.carry/bin/bins11a.tar.xz): fovea-base = main at the session's
# start; fovea-new / test_ops-new / test_golden_forward-new = this session's tree.
source "$(dirname "$0")/../../bench/gpu/call_common.sh"
call_begin s11call1 .carry/bin/bins11a.tar.xz
call_test_new
call_perf prefill "new"
if [ "${GPU_MIB:-0}" -gt 100000 ]; then
  DEADLINE=$(( ${DEADLINE:-550} - 260 )) call_ab 1 InternVL2-8B:none InternVL2-8B:fp8
  fam=fovea-base; [ -n "$NEW" ] && fam=fovea-new
  call_family_h200 $fam internvl3-38b,internvl3-78b-fp8 $(( $(left) - 20 ))
else
  call_ab 2 InternVL2-8B:none InternVL2-8B:fp8
  call_questions_ab 1 "4:48 16:16"
fi
save
