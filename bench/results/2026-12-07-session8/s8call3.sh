#!/usr/bin/env bash
# Session 2026-12-07 (8) call 3: the committed tree (e8260bf's C++) against main's (ebd9fa2), on
# bench/gpu/call_common.sh's stages. Binaries (.carry/bin/bins8c.tar.xz): fovea-base, fovea-new, test_ops-new,
# test_golden_forward-new. On an H200 the family rows that need more than 80 GB come first (issue 22).
source "$(dirname "$0")/../../bench/gpu/call_common.sh"
call_begin s8call3 .carry/bin/bins8c.tar.xz
call_family_h200 fovea-new
call_test_new
if [ -n "$NEW" ]; then
  python3 -c "import sys; sys.path.insert(0, 'bench/gpu'); import family_models as f; \
f.write_model_dir('InternVL2-8B', sys.argv[1], sys.argv[2])" /tmp/fovea_vit/model .carry/tokenizers > /dev/null
  for rep in 1 2; do
    for run in base:none new:none new:fp8-all; do
      v=${run%%:*} q=${run##*:}
      timeout -k 5 60 "$B/fovea-$v" bench --model /tmp/fovea_vit/model --images .carry/photos --backend cuda \
        --load-format dummy --kv-blocks 1024 --vit-alone 32 --vit-reps 3 --vit-hold 4 --quantization "$q" \
        --json "$R/vit_$v-$q-$rep.json" > "$R/vit_$v-$q-$rep.txt" 2>&1
      echo "$v $q vit alone rc=$?: $(grep -h 'ms per tile' "$R/vit_$v-$q-$rep.txt" | tr '\n' ' ')"
    done
  done
  save
fi
call_ab 1 InternVL2-8B:fp8-all InternVL2-8B:fp8
