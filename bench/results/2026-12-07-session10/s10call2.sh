#!/usr/bin/env bash
# Session 2026-12-07 (10) call 2: main (e65e5b3's C++) against the last decoder layer on the sampled rows alone
# (LlmForward::last_layer_sampled), on bench/gpu/call_common.sh's stages; then, on an H200 only, issue 22's family
# rows that need more than 80 GB with the new binary. Binaries (.carry/bin/bins10a.tar.xz): fovea-base = main;
# fovea-new / test_ops-new / test_golden_forward-new = this session's tree.
source "$(dirname "$0")/../../bench/gpu/call_common.sh"
call_begin s10call2 .carry/bin/bins10a.tar.xz
call_test_new
if [ "${GPU_MIB:-0}" -gt 100000 ]; then
  DEADLINE=$(( ${DEADLINE:-550} - 260 )) call_ab 1 InternVL2-8B:none InternVL2-8B:fp8
  fam=fovea-base; [ -n "$NEW" ] && fam=fovea-new
  call_family_h200 $fam internvl3-38b,internvl3-78b-fp8 $(( $(left) - 20 ))
else
  call_ab 2 InternVL2-8B:none InternVL2-8B:fp8
fi
save
