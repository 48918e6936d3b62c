#!/usr/bin/env bash
# Session 2026-12-07 call 5 (main's binary): on an H200 only, the family rows that need more than 80 GB
# (InternVL3-38B bf16, InternVL3-78B FP8); the archive is rewritten every 30 s so a cut call still returns rows.
cd "$(dirname "$0")/../.."
R=/tmp/s5call3; rm -rf $R; mkdir -p $R
save() { tar czf $OUT/s5call3.tgz -C $R . 2>/dev/null; }
tar xJf .carry/bin/bins.tar.xz -C .carry/bin
nvidia-smi --query-gpu=name,memory.total,driver_version,power.limit --format=csv,noheader | tee $R/gpu.txt
mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
[ "${mem:-0}" -gt 100000 ] || { echo "not an H200: nothing run"; save; exit 0; }
( while sleep 30; do save; done ) & saver=$!
OUT=$R/family WORK=/tmp/fovea_family FOVEA_BIN=$PWD/.carry/bin/fovea-main bench/gpu/family.sh \
  --only internvl3-38b,internvl3-78b-fp8 --budget ${BUDGET:-280} > $R/family_stdout.txt 2>&1
echo "family rc=$? at ${SECONDS}s"; kill $saver; tail -14 $R/family/family.md 2>/dev/null; save
