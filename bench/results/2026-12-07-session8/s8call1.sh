#!/usr/bin/env bash
# Session 2026-12-07 (8) call 1: the FP8 ViT with its qkv and fc1 inputs quantized by the norms before them
# (Backend::scale_add_norm_fp8, linear_fp8_rows with GELU), on the shared stages of bench/gpu/call_common.sh.
# Binaries (.carry/bin/bins8.tar.xz): fovea-base / test_ops-base = main's C++ (ebd9fa2); *-new = this session's;
# fovea-normfed = *-new with only the norm-fed ViT linears (qkv, fc1) in FP8 under fp8-all, proj and fc2 bf16.
# On an H200 the family rows that need more than 80 GB come first (issue 22).
source "$(dirname "$0")/../../bench/gpu/call_common.sh"
call_begin s8call1 .carry/bin/bins8.tar.xz
call_family_h200 fovea-base
call_test_new
if [ -n "$NEW" ]; then
  call_vit_alone "$NEW" none,fp8-all
  # The same tiles with main's FP8 ViT (each linear quantizing its own input) and the norm-fed-only variant,
  # alternating, for the before / after and the choice of proj / fc2.
  for rep in 1 2; do
    for v in base normfed; do
      timeout -k 5 60 "$B/fovea-$v" bench --model /tmp/fovea_vit/model --images .carry/photos --backend cuda \
        --load-format dummy --kv-blocks 1024 --vit-alone 32 --vit-reps 3 --vit-hold 6 --quantization fp8-all \
        --json "$R/vit_$v-fp8-all-$rep.json" > "$R/vit_$v-fp8-all-$rep.txt" 2>&1
      echo "$v fp8-all vit alone rc=$?: $(grep -h 'ms per tile' "$R/vit_$v-fp8-all-$rep.txt")"
    done
  done
  save
fi
call_ab 1 InternVL2-8B:fp8 InternVL2-8B:fp8-all
[ -n "$NEW" ] && call_vit_fp8_fidelity "$NEW" 64
