#!/usr/bin/env bash
# Session 2026-12-07 (8) call 2, on bench/gpu/call_common.sh's stages. Binaries (.carry/bin/bins8b.tar.xz):
# fovea-base = main's C++ (ebd9fa2); fovea-normfed = call 1's choice (fp8-all: the ViT's qkv and fc1 in FP8, their
# inputs quantized by the norms; proj and fc2 bf16); *-new = that plus GEMM tuning at every M (the fastest of the
# heuristic's candidates, per M up to 512 and per power-of-two class of M above; FP8 plans timed too).
# On an H200 the family rows that need more than 80 GB come first (issue 22).
source "$(dirname "$0")/../../bench/gpu/call_common.sh"
call_begin s8call2 .carry/bin/bins8b.tar.xz
call_family_h200 fovea-base
call_test_new
call_ab 1 InternVL2-8B:fp8 InternVL2-8B:none InternVL3_5-8B:fp8
if [ -n "$NEW" ]; then
  call_vit_alone "$NEW" none,fp8-all
  # The same tiles, alternating: base vs new in bf16 (the tuning alone), normfed vs new in fp8-all.
  for rep in 1 2; do
    for run in base:none new:none normfed:fp8-all new:fp8-all; do
      v=${run%%:*} q=${run##*:}
      timeout -k 5 60 "$B/fovea-$v" bench --model /tmp/fovea_vit/model --images .carry/photos --backend cuda \
        --load-format dummy --kv-blocks 1024 --vit-alone 32 --vit-reps 3 --vit-hold 4 --quantization "$q" \
        --json "$R/vit_$v-$q-$rep.json" > "$R/vit_$v-$q-$rep.txt" 2>&1
      echo "$v $q vit alone rc=$?: $(grep -h 'ms per tile' "$R/vit_$v-$q-$rep.txt" | tr '\n' ' ')"
    done
  done
  save
  call_vit_fp8_fidelity "$NEW" 64
fi
