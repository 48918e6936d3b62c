#!/usr/bin/env bash
# Builds bench/gpu/gemm_configs.cc here (no GPU needed) into build-gpu/gemm_configs, to be carried in .carry/bin;
# on the device: `.carry/bin/gemm_configs [M,N,K,bias|bias+gelu ...]` (default: InternViT-300M's four linears).
set -euo pipefail
cd "$(dirname "$0")/../.."
cuda=${CUDA_HOME:-/usr/local/cuda}
mkdir -p build-gpu
g++ -O2 -std=c++17 -I"$cuda/include" bench/gpu/gemm_configs.cc -L"$cuda/lib64" -lcublasLt -lcudart_static \
  -lpthread -ldl -lrt -o build-gpu/gemm_configs
echo "built build-gpu/gemm_configs"
