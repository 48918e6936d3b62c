#!/usr/bin/env bash
# Session 2026-12-06d call 2: FP8 side by side, Fovea (the carried fovea-new) and LMDeploy 0.18's FP8 (PyTorch
# engine) on the instrument's random InternVL2-8B-shaped -hf checkpoint, the same photos and prompt tokens, one
# question, one token (run_all.sh's fp8 run + peers.sh --engines lmdeploy --precisions fp8). One archive.
cd "$(dirname "$0")/../.."
R=/tmp/call2; rm -rf $R; mkdir -p $R
save() { tar czf $OUT/call2.tgz -C $R . ; }
tar xJf .carry/bin/bins.tar.xz -C .carry/bin fovea-new
export WORK=/tmp/fovea_bench FOVEA_BIN=.carry/bin/fovea-new FOVEA_FP8_ARGS="--quantization fp8"
OUT=$R/run_all timeout -k 5 200 bash bench/gpu/run_all.sh --name fp8-peers --budget 190 \
  --skip fovea_official,fovea_compact,fovea_bench,fovea_decode,fovea_profile,reference > $R/run_all.txt 2>&1
echo "run_all rc=$? at ${SECONDS}s"; grep -iE "fp8|QPM" $R/run_all.txt | tail -6
save
OUT=$R/peers timeout -k 5 240 bash bench/gpu/peers.sh --stash .carry_peers/lmd --engines lmdeploy --precisions fp8 \
  --photos 120 --budget 230 > $R/peers.txt 2>&1
echo "peers rc=$? at ${SECONDS}s"; tail -12 $R/peers.txt
save
