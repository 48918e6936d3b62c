// The W4A16 kernels around the fused small-M GEMM (gemm_w4_v2.cu): its split-K reduction, the dequantization of
// the large-M path and act-order's column gather. gemm_w4.h explains the layout, the exactness argument and the
// tiling.
#include <cuda_fp16.h>

#include <algorithm>

#include "backend/cuda/attention_mma.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gemm_w4.h"
#include "backend/cuda/gemm_w4_device.cuh"
#include "backend/cuda/gemm_w4_v2.h"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/w4_layout.h"

namespace fovea::cuda {
namespace {

using w4_device::param_scale;

constexpr int kMinGroup = 16;  // a 16-column mma step never straddles two groups

// y = sum of the splits' partials in split order, + bias; two columns per thread.
__global__ void w4_reduce_kernel(const float* __restrict__ partials, const bf16* __restrict__ bias,
                                 bf16* __restrict__ y, int m, int n, int splits) {
  const int64_t total = int64_t(m) * n;
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 2;
  if (i >= total) return;
  float2 sum = make_float2(0.f, 0.f);
  for (int s = 0; s < splits; ++s) {
    const float2 p = *reinterpret_cast<const float2*>(partials + s * total + i);
    sum.x += p.x;
    sum.y += p.y;
  }
  if (bias) {
    const int col = int(i % n);
    sum.x += __bfloat162float(bias[col]);
    sum.y += __bfloat162float(bias[col + 1]);
  }
  *reinterpret_cast<uint32_t*>(y + i) = mma_detail::pack_bf16(sum.x, sum.y);
}

// One thread per 8 output columns of one weight row, in float as the host dequantization computes it.
__global__ void w4_dequantize_kernel(const uint32_t* __restrict__ codes, const uint32_t* __restrict__ params,
                                     const int* __restrict__ inverse_perm, bf16* __restrict__ w, int rows, int k,
                                     int group) {
  const int per_row = (k + 7) / 8;
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= int64_t(rows) * per_row) return;
  const int row = int(idx / per_row), c0 = int(idx % per_row) * 8;
  const uint32_t* row_codes = codes + int64_t(row) * w4::code_words(k);
  const uint32_t* row_params = params + int64_t(row) * (k / group);
  float v[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const int c = min(c0 + e, k - 1);
    const int stored = inverse_perm ? min(max(inverse_perm[c], 0), k - 1) : c;
    const w4::CodeSlot slot = w4::code_slot(stored);
    const int q = int((row_codes[slot.word] >> slot.shift) & 0xFu);
    const uint32_t p = row_params[stored / group];
    v[e] = (float(q) - float(w4::param_zero(p))) * param_scale(p);
  }
  bf16* out = w + int64_t(row) * k + c0;
  if (k % 8 == 0) {
    store_bf16<8>(out, v);
  } else {
    for (int e = 0; e < 8 && c0 + e < k; ++e) out[e] = __float2bfloat16_rn(v[e]);
  }
}

// One thread per 32-column chunk of one weight row (k % 32 == 0, group % 16 == 0, no act-order): the chunk's four
// code words in one 16-byte load, its (at most two) params read once, four 16-byte stores of 8 columns each.
// Store j (0-3) holds columns 8 j + 2 t + e of the chunk, i.e. nibble j + 4 e of word t (w4_layout.h), and its 16
// columns' step (j / 2) lies in one group. The float arithmetic is the host's: 2^23 + q is exact in float, so
// (2^23 + q) - (2^23 + z) is float(q) - float(z) without an int-to-float conversion, times s, rounded once.
__global__ void w4_dequantize_chunks_kernel(const uint32_t* __restrict__ codes, const uint32_t* __restrict__ params,
                                            bf16* __restrict__ w, int rows, int k, int group) {
  const int chunks = k / w4::kChunkColumns;
  const int idx = int(blockIdx.x) * int(blockDim.x) + int(threadIdx.x);  // < rows * chunks < 2^31 (launch checks)
  if (idx >= rows * chunks) return;
  const int row = idx / chunks, c0 = (idx - row * chunks) * w4::kChunkColumns;
  const uint4 packed = reinterpret_cast<const uint4*>(codes)[idx];  // a row is 4 * chunks words: chunk idx's four
  const uint32_t words[4] = {packed.x, packed.y, packed.z, packed.w};
  const uint32_t* row_params = params + int64_t(row) * (k / group);
  const int group0 = c0 / group;
  const int group1 = c0 + 16 < (group0 + 1) * group ? group0 : group0 + 1;  // the second 16-column step's group
  bf16* out = w + int64_t(row) * k + c0;
#pragma unroll
  for (int step = 0; step < 2; ++step) {
    const uint32_t p = row_params[step == 0 ? group0 : group1];
    const float s = param_scale(p), biased_zero = 8388608.f + float(w4::param_zero(p));
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int j = 2 * step + half;
      float v[8];
#pragma unroll
      for (int t = 0; t < 4; ++t) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const uint32_t q = (words[t] >> (4 * (j + 4 * e))) & 0xFu;
          v[2 * t + e] = (__uint_as_float(0x4B000000u | q) - biased_zero) * s;
        }
      }
      store_bf16<8>(out + 8 * j, v);
    }
  }
}

__global__ void w4_gather_columns_kernel(const bf16* __restrict__ x, const int* __restrict__ perm,
                                         bf16* __restrict__ out, int m, int k) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(m) * k) return;
  const int64_t row = i / k;
  const int c = int(i % k);
  out[i] = x[row * k + min(max(perm[c], 0), k - 1)];
}

}  // namespace

bool w4_fused_supported(int64_t m, int64_t n, int64_t k, int64_t group, bool x_aligned) {
  const bool group_fits = group % kMinGroup == 0 && (kW4TileK % group == 0 || group % kW4TileK == 0);
  return m >= 1 && m <= kW4FusedMaxRows && n >= 8 && n % 8 == 0 && k >= kW4TileK && k % kW4TileK == 0 && group_fits &&
         x_aligned && n <= int64_t(kW4TileN) * 65535 && k <= (int64_t(1) << 30);
}

int w4_fused_splits(int64_t n, int64_t k, int sm_count) {
  const int64_t tiles = (n + kW4TileN - 1) / kW4TileN, k_tiles = k / kW4TileK;
  // At most two blocks per SM in one wave (the 4-stage ring at M <= 32 leaves room for two); each split at least
  // two K stages so the ring has something to overlap.
  const int64_t wanted = std::max<int64_t>(1, 2 * int64_t(sm_count) / std::max<int64_t>(tiles, 1));
  return int(std::clamp<int64_t>(std::min<int64_t>(wanted, k_tiles / 2), 1, kW4MaxSplits));
}

size_t w4_dequantized_bytes(int64_t n, int64_t k) { return size_t(n) * size_t(k) * 2; }

size_t w4_partials_offset(int64_t k, bool permuted) {
  const size_t gathered = permuted ? size_t(kW4FusedMaxRows) * size_t(k) * 2 : 0;
  return (gathered + 255) / 256 * 256;
}

size_t w4_workspace_bytes(int64_t n, int64_t k, int64_t group, bool permuted, int sm_count) {
  size_t fused = 0;
  if (w4_fused_supported(1, n, k, group, true)) {
    const int splits = w4_fused_splits(n, k, sm_count);
    fused = w4_partials_offset(k, permuted) + (splits > 1 ? size_t(splits) * kW4FusedMaxRows * size_t(n) * 4 : 0);
  }
  return std::max(fused, w4_dequantized_bytes(n, k));
}

void prepare_w4_kernels() { prepare_w4_v2_kernels(); }

void launch_w4_gather_columns(const bf16* x, const int* perm, bf16* out, int m, int k, cudaStream_t stream) {
  constexpr int kBlock = 256;
  w4_gather_columns_kernel<<<blocks_for(int64_t(m) * k, kBlock), kBlock, 0, stream>>>(x, perm, out, m, k);
  FOVEA_CUDA_CHECK(cudaGetLastError());
}

void launch_w4_dequantize(const uint32_t* codes, const uint32_t* params, const int* inverse_perm, bf16* w, int rows,
                          int k, int group, cudaStream_t stream) {
  constexpr int kBlock = 256;
  const int64_t chunks = int64_t(rows) * (k / w4::kChunkColumns);
  const bool aligned = (reinterpret_cast<uintptr_t>(codes) & 15u) == 0 && (reinterpret_cast<uintptr_t>(w) & 15u) == 0;
  if (!inverse_perm && k % w4::kChunkColumns == 0 && group % 16 == 0 && aligned &&
      chunks < (int64_t(1) << 31) - kBlock) {
    w4_dequantize_chunks_kernel<<<blocks_for(chunks, kBlock), kBlock, 0, stream>>>(codes, params, w, rows, k, group);
    FOVEA_CUDA_CHECK(cudaGetLastError());
    return;
  }
  const int64_t work = int64_t(rows) * ((k + 7) / 8);
  w4_dequantize_kernel<<<blocks_for(work, kBlock), kBlock, 0, stream>>>(codes, params, inverse_perm, w, rows, k, group);
  FOVEA_CUDA_CHECK(cudaGetLastError());
}

void launch_w4_fused(const bf16* x, const uint32_t* codes, const uint32_t* params, const bf16* bias, bf16* y,
                     float* partials, int m, int n, int k, int group, int splits, cudaStream_t stream) {
  launch_w4_fused_v2(x, codes, params, bias, y, partials, m, n, k, group, splits, stream);
  if (splits > 1) {
    constexpr int kBlock = 256;
    w4_reduce_kernel<<<blocks_for(int64_t(m) * n / 2, kBlock), kBlock, 0, stream>>>(partials, bias, y, m, n, splits);
    FOVEA_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace fovea::cuda
