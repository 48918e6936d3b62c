#!/usr/bin/env bash
# Session 2026-12-07 call 2. Binaries (stripped, sm_90a): fovea-main (main, 77a0ae1's C++), fovea-tails (dense
# attention's ragged ends on CUDA cores), fovea-fma4 / fovea-fma2 (+ every 4th / 2nd 8-key column group's exp2 on
# the FMA pipe, ViT config only), fovea-tune (tails + every GEMM shape's cuBLASLt candidates timed, not only
# M <= 512); test_ops of each, tgf (CUDA goldens) of tails.
# On an H200: the family rows that need > 80 GB first (InternVL3-38B bf16, InternVL3-78B FP8, main's binary).
# Then: test_ops; the ViT alone (fovea bench --vit-alone 32) of the four binaries alternating, 3 rounds, and an
# op profile of each; goldens; an end-to-end A/B main vs tails (InternVL2-8B bf16, InternVL3.5-8B FP8). One
# archive, saved per stage.
cd "$(dirname "$0")/../.."
R=/tmp/s5call2; rm -rf $R; mkdir -p $R/vit
save() { tar czf $OUT/s5call2.tgz -C $R . ; }
left() { echo $(( ${DEADLINE:-585} - SECONDS )); }
tar xJf .carry/bin/bins_s5.tar.xz -C .carry/bin
B=.carry/bin
nvidia-smi --query-gpu=name,memory.total,driver_version,power.limit --format=csv,noheader | tee $R/gpu.txt
mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
if [ "${mem:-0}" -gt 100000 ] && [ -z "${SKIP_FAMILY:-}" ]; then
  OUT=$R/family WORK=/tmp/fovea_family FOVEA_BIN=$PWD/$B/fovea-main bench/gpu/family.sh \
    --only internvl3-38b,internvl3-78b-fp8 --budget ${BUDGET:-170} > $R/family_stdout.txt 2>&1
  echo "family rc=$? at ${SECONDS}s"; tail -8 $R/family/family.md 2>/dev/null; save
fi
timeout -k 5 150 $B/test_ops > $R/test_ops.txt 2>&1; echo "test_ops rc=$? at ${SECONDS}s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED" $R/test_ops.txt | head -12
for v in fma4 fma2; do timeout -k 5 60 $B/test_ops-$v --gtest_filter='*Attention*' > $R/test_ops-$v.txt 2>&1
  echo "test_ops-$v rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $R/test_ops-$v.txt | tr '\n' ' ')"; done
save
W=/tmp/fovea_vit
python3 bench/gpu/workload.py --photos .carry/photos --out $W --requests 40 > $R/vit_workload.log 2>&1
python3 -c "import sys; sys.path.insert(0, 'bench/gpu'); import family_models as f; \
f.write_model_dir('InternVL2-8B', '$W/model', '.carry/tokenizers')" >> $R/vit_workload.log 2>&1
vit() {  # vit BIN TAG [env]
  timeout -k 5 90 env $3 $B/$1 bench --model $W/model --images $W/images --backend cuda --load-format dummy \
    --kv-blocks 1024 --vit-alone 32 --vit-reps 3 --json $R/vit/$2.json > $R/vit/$2.log 2>&1
  python3 -c "import json,sys; d=json.load(open(sys.argv[1]))['vit_alone']; print(sys.argv[2], \
round(d['ms_per_tile'],4), 'ms/tile')" $R/vit/$2.json $2 2>/dev/null || echo "$2 failed"
}
for round in 1 2; do
  [ $(left) -gt 150 ] || break
  order="fovea-main fovea-tails fovea-fma4 fovea-fma2 fovea-tune"
  [ $round = 2 ] && order="fovea-tune fovea-fma2 fovea-fma4 fovea-tails fovea-main"
  for b in $order; do vit $b $b-r$round; done; save
done
for b in fovea-main fovea-tails fovea-fma4 fovea-fma2 fovea-tune; do
  [ $(left) -gt 120 ] || break
  vit $b $b-profile FOVEA_PROFILE_OPS=1 > /dev/null; grep -E "attention_dense|^linear M=.*K=1024 bias$" $R/vit/$b-profile.log \
    | head -3 | sed "s/^/$b: /"; grep "gemm tune" $R/vit/$b-profile.log | head -8
done; save
if [ $(left) -gt 100 ]; then
  timeout -k 5 90 $B/tgf > $R/test_golden_forward.txt 2>&1; echo "goldens rc=$? at ${SECONDS}s"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED" $R/test_golden_forward.txt | head -8; save
fi
if [ $(left) -gt 110 ]; then
  OUT=$R WORK=/tmp/fovea_ab timeout -k 5 $(( $(left) - 10 )) bench/gpu/binary_ab.sh $B/fovea-main $B/fovea-tails 1 \
    InternVL2-8B:none InternVL3_5-8B:fp8 2>&1 | grep -v "^NVIDIA\|^$"; echo "ab done at ${SECONDS}s"
fi
save
