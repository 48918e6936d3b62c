#!/usr/bin/env bash
# Session 2026-12-07 (11) call 3: the final binary (the vectorized rope + KV write; silu_mul_fp8 back to main's
# kernel after call 1's profile) through test_ops and the CUDA goldens; then on an H200 issue 22's rows that need
# more than 80 GB, else two more end-to-end A/B rounds against main (b7a278b). Binaries: .carry/bin/bins11b.tar.xz.
source "$(dirname "$0")/../../bench/gpu/call_common.sh"
call_begin s11call3 .carry/bin/bins11b.tar.xz
call_test_new
if [ "${GPU_MIB:-0}" -gt 100000 ]; then
  fam=fovea-base; [ -n "$NEW" ] && fam=fovea-new
  call_family_h200 $fam internvl3-38b,internvl3-78b-fp8 $(( $(left) - 20 ))
else
  call_ab 2 InternVL2-8B:none InternVL2-8B:fp8
fi
save
