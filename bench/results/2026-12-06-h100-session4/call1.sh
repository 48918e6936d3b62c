#!/usr/bin/env bash
# Session 2026-12-06d call 1 (commits in .carry/COMMIT): on an H200 the family rows that need > 80 GB first
# (InternVL3-38B bf16, InternVL3-78B FP8; then the 78B 4-bit rerun), with main's binary; then the staged kernels'
# GPU op tests and CUDA goldens; then the A/B main vs staged on the 8B shapes. One archive, saved after every stage.
cd "$(dirname "$0")/../.."
R=/tmp/call1; rm -rf $R; mkdir -p $R
save() { tar czf $OUT/call1.tgz -C $R . ; }
left() { echo $(( ${DEADLINE:-580} - SECONDS )); }
tar xJf .carry/bin/bins.tar.xz -C .carry/bin
nvidia-smi --query-gpu=name,memory.total,driver_version,power.limit --format=csv,noheader | tee $R/gpu.txt
mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
if [ "${mem:-0}" -gt 100000 ]; then rows=internvl3-38b,internvl3-78b-fp8; budget=240
else rows=""; fi  # on an 80 GB card: no family rows (the 4-bit 78B rerun waits)
[ -z "$rows" ] || {
OUT=$R/family WORK=/tmp/fovea_family FOVEA_BIN=.carry/bin/fovea-base bench/gpu/family.sh --only $rows --budget $budget \
  > $R/family_stdout.txt 2>&1; echo "family rc=$? ($rows) at ${SECONDS}s"; tail -25 $R/family/family.md 2>/dev/null
save; }
timeout -k 5 120 .carry/bin/test_ops > $R/test_ops.txt 2>&1; echo "test_ops rc=$? at ${SECONDS}s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED" $R/test_ops.txt | head -20
save
if [ $(left) -gt 200 ]; then  # the ViT alone, Fovea (base) vs transformers, same batch, burst and held
  python3 bench/gpu/workload.py --photos .carry/photos --out /tmp/fovea_vit --requests 40 > $R/vit_workload.log 2>&1
  python3 -c "import sys; sys.path.insert(0, 'bench/gpu'); import family_models as f; \
f.write_model_dir('InternVL2-8B', '/tmp/fovea_vit/model', '.carry/tokenizers')" >> $R/vit_workload.log 2>&1
  timeout -k 5 150 python3 bench/gpu/vit_alone.py --fovea .carry/bin/fovea-base --model-dir /tmp/fovea_vit/model \
    --images /tmp/fovea_vit/images --tiles 32 --reps 3 --hold 6 --rounds 2 --out $R/vit_alone.json > $R/vit_alone.log 2>&1
  echo "vit_alone rc=$? at ${SECONDS}s"; tail -3 $R/vit_alone.log
  save
fi
timeout -k 5 90 .carry/bin/tgf > $R/test_golden_forward.txt 2>&1; echo "goldens rc=$? at ${SECONDS}s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED" $R/test_golden_forward.txt | head -20
save
reps=1; [ $(left) -gt 300 ] && reps=2
if [ $(left) -gt 120 ]; then
  OUT=$R WORK=/tmp/fovea_ab timeout -k 5 $(( $(left) - 10 )) bench/gpu/binary_ab.sh .carry/bin/fovea-base \
    .carry/bin/fovea-new $reps 2>&1 | grep -v "^NVIDIA\|^$" ; echo "ab done at ${SECONDS}s"
fi
save
