#!/usr/bin/env bash
# Session 2026-12-07 call 6: the ViT's dense attention configuration at head dim 64 (Pipe44 in attention.cu),
# main's <1 warpgroup, 64-key tiles, 3 stages, 2 blocks/SM> against 2 warpgroups on 128-key tiles (2 or 3 stages,
# setmaxnreg 232) and 3 warpgroups on 128-key tiles (setmaxnreg 152): test_ops' attention cases of each, then
# `fovea bench --vit-alone 32` with an op profile per binary, then timed rounds while time is left. One archive.
cd "$(dirname "$0")/../.."
R=/tmp/s5call4; rm -rf $R; mkdir -p $R/vit
save() { tar czf $OUT/s5call4.tgz -C $R . ; }
left() { echo $(( ${DEADLINE:-230} - SECONDS )); }
tar xJf .carry/bin/bins_next.tar.xz -C .carry/bin
B=.carry/bin V="p2k128s2 p2k128s3 p3k128s2"
nvidia-smi --query-gpu=name,memory.total,driver_version,power.limit --format=csv,noheader | tee $R/gpu.txt
for v in $V; do timeout -k 5 60 $B/test_ops-$v --gtest_filter='*Attention*' > $R/test_ops-$v.txt 2>&1
  echo "test_ops-$v rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $R/test_ops-$v.txt | tr '\n' ' ')"; done
save
W=/tmp/fovea_vit
python3 bench/gpu/workload.py --photos .carry/photos --out $W --requests 40 > $R/vit_workload.log 2>&1
python3 -c "import sys; sys.path.insert(0, 'bench/gpu'); import family_models as f; \
f.write_model_dir('InternVL2-8B', '$W/model', '.carry/tokenizers')" >> $R/vit_workload.log 2>&1
vit() {  # vit BIN TAG [env]
  timeout -k 5 60 env $3 $B/$1 bench --model $W/model --images $W/images --backend cuda --load-format dummy \
    --kv-blocks 1024 --vit-alone 32 --vit-reps 3 --json $R/vit/$2.json > $R/vit/$2.log 2>&1
  python3 -c "import json,sys; d=json.load(open(sys.argv[1]))['vit_alone']; print(sys.argv[2], \
round(d['ms_per_tile'],4), 'ms/tile')" $R/vit/$2.json $2 2>/dev/null || echo "$2 failed"
}
for b in fovea-main fovea-p2k128s2 fovea-p2k128s3 fovea-p3k128s2; do
  [ $(left) -gt 15 ] || break
  vit $b $b-profile FOVEA_PROFILE_OPS=1; grep -E "attention_dense" $R/vit/$b-profile.log | head -1 | sed "s/^/$b: /"
done; save
for round in 1 2 3; do
  order="fovea-main fovea-p2k128s2 fovea-p2k128s3 fovea-p3k128s2"
  [ $round = 2 ] && order="fovea-p3k128s2 fovea-p2k128s3 fovea-p2k128s2 fovea-main"
  for b in $order; do [ $(left) -gt 15 ] || break 2; vit $b $b-r$round; done; save
done
save
