#!/usr/bin/env bash
# Session 2026-12-07 (8) call 4: every cuBLASLt configuration for InternViT-300M's four bf16 linears at 32 tiles
# (bench/gpu/gemm_configs.cc, built by bench/gpu/gemm_configs.sh, carried as .carry/bin/gemm_configs).
cd "$(dirname "$0")/../.." || exit 1
nvidia-smi --query-gpu=name,memory.total,driver_version,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
timeout -k 5 400 .carry/bin/gemm_configs 2>&1 | tee "$OUT/gemm_configs.txt"
