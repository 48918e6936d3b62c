#!/usr/bin/env bash
# Session 2026-12-07 (8) call 6: where the K = 1,024 linears lose their rate — the heuristic's picks
# (bench/gpu/gemm_configs --heuristic-only) for the ViT's shapes with and without their epilogue, at K = 1,024,
# 2,048 and 4,096, and at twice the rows.
cd "$(dirname "$0")/../.." || exit 1
nvidia-smi --query-gpu=name,memory.total,driver_version,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
timeout -k 5 300 .carry/bin/gemm_configs --heuristic-only 32800,3072,1024,none 32800,3072,1024,bias \
  32800,3072,2048,bias 32800,3072,4096,bias 65600,3072,1024,bias 32800,4096,1024,none 32800,4096,1024,bias \
  32800,4096,1024,bias+gelu 32800,4096,4096,bias 32800,1024,1024,none 32800,1024,1024,bias 32800,1024,4096,bias \
  2>&1 | tee "$OUT/gemm_heuristic.txt"
