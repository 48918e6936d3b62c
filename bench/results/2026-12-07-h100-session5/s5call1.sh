#!/usr/bin/env bash
# Session 2026-12-07 call 1 (main's binary). On an H200: the family rows that need more than 80 GB (InternVL3-38B
# bf16, InternVL3-78B FP8). On an 80 GB card: FP8 side by side, Fovea and LMDeploy 0.18's FP8 (PyTorch engine),
# on the instrument's random InternVL2-8B-shaped -hf checkpoint, same photos and prompt tokens, one question.
cd "$(dirname "$0")/../.."
R=/tmp/s5call1; rm -rf $R; mkdir -p $R
save() { tar czf $OUT/s5call1.tgz -C $R . ; }
tar xJf .carry/bin/bins.tar.xz -C .carry/bin
F=$PWD/.carry/bin/fovea-main
nvidia-smi --query-gpu=name,memory.total,driver_version,power.limit --format=csv,noheader | tee $R/gpu.txt
mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
if [ "${mem:-0}" -gt 100000 ]; then
  OUT=$R/family WORK=/tmp/fovea_family FOVEA_BIN=$F bench/gpu/family.sh \
    --only internvl3-38b,internvl3-78b-fp8 --budget ${BUDGET:-170} > $R/family_stdout.txt 2>&1
  echo "family rc=$? at ${SECONDS}s"; tail -22 $R/family/family.md 2>/dev/null
  save; exit 0
fi
export WORK=/tmp/fovea_bench FOVEA_BIN=$F FOVEA_FP8_ARGS="--quantization fp8"
OUT=$R/run_all timeout -k 5 200 bash bench/gpu/run_all.sh --name fp8-peers --budget 190 \
  --skip fovea_official,fovea_compact,fovea_bench,fovea_decode,fovea_profile,reference > $R/run_all.txt 2>&1
echo "run_all rc=$? at ${SECONDS}s"; grep -iE "fp8|QPM" $R/run_all.txt | tail -6
save
OUT=$R/peers timeout -k 5 240 bash bench/gpu/peers.sh --stash .carry_peers/lmd --engines lmdeploy --precisions fp8 \
  --photos 120 --budget 230 > $R/peers.txt 2>&1
echo "peers rc=$? at ${SECONDS}s"; tail -12 $R/peers.txt
save
