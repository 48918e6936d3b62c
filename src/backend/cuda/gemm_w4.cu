// The W4A16 kernels: the fused small-M GEMM, its split-K reduction, the dequantization of the large-M path and
// act-order's column gather. gemm_w4.h explains the layout, the exactness argument and the tiling.
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

#include "backend/cuda/attention_mma.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gemm_w4.h"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/w4_layout.h"

namespace fovea::cuda {
namespace {

using mma_detail::cp_async16;
using mma_detail::cp_async_commit;
using mma_detail::cp_async_wait;
using mma_detail::ldmatrix_x4;
using mma_detail::mma_bf16;
using mma_detail::pack_bf16;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kWarpN = kW4TileN / kWarps;  // 32 weight rows per warp: four n8 tiles
constexpr int kNTiles = kWarpN / 8;
constexpr int kStages = 4;
constexpr int kCodeStride = kW4TileK / 8 + 4;  // words per row: +4 puts the 8 rows a warp reads on distinct banks
constexpr int kXStride = kW4TileK + 8;         // bf16 per row: +16 bytes keeps ldmatrix free of bank conflicts
constexpr int kMinGroup = 16;                  // a 16-column mma step never straddles two groups
constexpr int kParamStride = kW4TileK / kMinGroup + 1;
constexpr int kCodeBytes = kW4TileN * kCodeStride * 4;
constexpr int kParamBytes = kW4TileN * kParamStride * 4;
static_assert(kCodeBytes % 16 == 0 && kParamBytes % 16 == 0, "stage regions stay 16-byte aligned");

template <int kMTiles>
constexpr int stage_bytes() {
  return kCodeBytes + kParamBytes + kMTiles * 16 * kXStride * 2;
}
template <int kMTiles>
constexpr int smem_bytes() {
  return kStages * stage_bytes<kMTiles>();
}

__device__ __forceinline__ void cp_async4(void* dst, const void* src, bool valid) {
  const uint32_t addr = uint32_t(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(addr), "l"(src), "r"(valid ? 4 : 0));
}

__device__ __forceinline__ float param_scale(uint32_t p) {
  const uint32_t bits = p & w4::kScaleMask;
  return (p & w4::kBf16ScaleFlag) ? __uint_as_float(bits << 16) : __half2float(__ushort_as_half(uint16_t(bits)));
}

// One group's scale and zero point as bf16x2 operands: s = hi + lo exactly (hi: s truncated to bf16, lo: the
// rest, at most 3 significant bits), zero = 128 + z in both halves.
struct GroupOperands {
  uint32_t hi, lo, zero;
};
__device__ __forceinline__ GroupOperands group_operands(uint32_t p) {
  const float s = param_scale(p);
  const float hi = __uint_as_float(__float_as_uint(s) & 0xFFFF0000u);
  const uint32_t lo = uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(s - hi)));  // exact: s - hi fits bf16
  const uint32_t hi_bits = __float_as_uint(hi) >> 16;
  const uint32_t z = uint32_t(w4::param_zero(p));
  return {hi_bits | (hi_bits << 16), lo | (lo << 16), 0x43004300u | z | (z << 16)};
}

// The bf16x2 fragment register of the codes in bits 0-3 and 16-19 of `bits`: bf16((q - z) * s) for each, the
// exact product rounded once (see gemm_w4.h).
__device__ __forceinline__ uint32_t dequantize_pair(uint32_t bits, const GroupOperands& g) {
  const uint32_t q = (bits & 0x000F000Fu) | 0x43004300u;  // bf16 128 + q in each half
  uint32_t d, lo, w;
  asm("sub.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(q), "r"(g.zero));
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(lo) : "r"(d), "r"(g.lo));
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(w) : "r"(d), "r"(g.hi), "r"(lo));
  return w;
}

// Block (blockIdx.x, blockIdx.y): weight rows [128 x, 128 x + 128), K stages of split y. Rows of x past m and
// weight rows past n are zero-filled in shared memory and never stored.
template <int kMTiles>
__global__ void __launch_bounds__(kThreads)
    w4_fused_kernel(const bf16* __restrict__ x, const uint32_t* __restrict__ codes, const uint32_t* __restrict__ params,
                    const bf16* __restrict__ bias, bf16* __restrict__ y, float* __restrict__ partials, int m, int n,
                    int k, int group) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int n0 = int(blockIdx.x) * kW4TileN;
  const int split = int(blockIdx.y), splits = int(gridDim.y);
  const int k_tiles = k / kW4TileK;
  const int kt_begin = split * k_tiles / splits, kt_count = (split + 1) * k_tiles / splits - kt_begin;
  const int words_per_row = k / 8, groups = k / group;
  const int groups_per_stage = group >= kW4TileK ? 1 : kW4TileK / group;
  const int tid = int(threadIdx.x), warp = tid / 32, lane = tid % 32;

  auto codes_of = [&](int slot) { return reinterpret_cast<uint32_t*>(smem + slot * stage_bytes<kMTiles>()); };
  auto params_of = [&](int slot) {
    return reinterpret_cast<uint32_t*>(smem + slot * stage_bytes<kMTiles>() + kCodeBytes);
  };
  auto x_of = [&](int slot) {
    return reinterpret_cast<bf16*>(smem + slot * stage_bytes<kMTiles>() + kCodeBytes + kParamBytes);
  };

  auto load_stage = [&](int slot, int kt) {
    const int k0 = kt * kW4TileK;
    uint32_t* s_codes = codes_of(slot);
#pragma unroll
    for (int i = tid; i < kW4TileN * 4; i += kThreads) {  // 4 x 16 bytes per weight row
      const int row = i / 4, part = i % 4;
      const bool valid = n0 + row < n;
      const uint32_t* src = valid ? codes + int64_t(n0 + row) * words_per_row + k0 / 8 + part * 4 : codes;
      cp_async16(s_codes + row * kCodeStride + part * 4, src, valid);
    }
    uint32_t* s_params = params_of(slot);
    const int g0 = k0 / group;
    for (int i = tid; i < kW4TileN * groups_per_stage; i += kThreads) {
      const int row = i / groups_per_stage, gi = i % groups_per_stage;
      const bool valid = n0 + row < n;
      const uint32_t* src = valid ? params + int64_t(n0 + row) * groups + g0 + gi : params;
      cp_async4(s_params + row * kParamStride + gi, src, valid);
    }
    bf16* s_x = x_of(slot);
#pragma unroll
    for (int i = tid; i < kMTiles * 16 * (kW4TileK / 8); i += kThreads) {  // 16 x 16 bytes per x row
      const int row = i / (kW4TileK / 8), part = i % (kW4TileK / 8);
      const bool valid = row < m;
      const bf16* src = valid ? x + int64_t(row) * k + k0 + part * 8 : x;
      cp_async16(s_x + row * kXStride + part * 8, src, valid);
    }
  };

  const int g = lane / 4, t = lane % 4;
  float acc[kMTiles][kNTiles][4] = {};
  auto compute_stage = [&](int slot) {
    const uint32_t* s_codes = codes_of(slot);
    const uint32_t* s_params = params_of(slot);
    const bf16* s_x = x_of(slot);
    GroupOperands ops[kNTiles];
#pragma unroll
    for (int chunk = 0; chunk < kW4TileK / 32; ++chunk) {
      uint32_t words[kNTiles];
#pragma unroll
      for (int j = 0; j < kNTiles; ++j) words[j] = s_codes[(warp * kWarpN + j * 8 + g) * kCodeStride + chunk * 4 + t];
#pragma unroll
      for (int step = 0; step < 2; ++step) {
        const int kk = chunk * 32 + step * 16;  // column within the stage
        if (kk == 0 || kk % group == 0) {
          const int gi = group >= kW4TileK ? 0 : kk / group;
#pragma unroll
          for (int j = 0; j < kNTiles; ++j)
            ops[j] = group_operands(s_params[(warp * kWarpN + j * 8 + g) * kParamStride + gi]);
        }
        uint32_t a[kMTiles][4];
#pragma unroll
        for (int mi = 0; mi < kMTiles; ++mi)
          ldmatrix_x4(a[mi], s_x + (mi * 16 + lane % 16) * kXStride + kk + (lane / 16) * 8);
#pragma unroll
        for (int j = 0; j < kNTiles; ++j) {
          const uint32_t b0 = dequantize_pair(words[j] >> (8 * step), ops[j]);      // columns 2t, 2t + 1
          const uint32_t b1 = dequantize_pair(words[j] >> (8 * step + 4), ops[j]);  // columns 2t + 8, 2t + 9
#pragma unroll
          for (int mi = 0; mi < kMTiles; ++mi) mma_bf16(acc[mi][j], a[mi], b0, b1);
        }
      }
    }
  };

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < kt_count) load_stage(s, kt_begin + s);
    cp_async_commit();
  }
  for (int it = 0; it < kt_count; ++it) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // stage `it` landed for every thread; stage it - 1's slot is free again
    const int next = it + kStages - 1;
    if (next < kt_count) load_stage(next % kStages, kt_begin + next);
    cp_async_commit();
    compute_stage(it % kStages);
  }
  cp_async_wait<0>();

#pragma unroll
  for (int mi = 0; mi < kMTiles; ++mi) {
#pragma unroll
    for (int j = 0; j < kNTiles; ++j) {
      const int col = n0 + warp * kWarpN + j * 8 + 2 * t;
      if (col >= n) continue;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = mi * 16 + g + 8 * h;
        if (row >= m) continue;
        float v0 = acc[mi][j][2 * h], v1 = acc[mi][j][2 * h + 1];
        if (splits > 1) {
          *reinterpret_cast<float2*>(partials + (int64_t(split) * m + row) * n + col) = make_float2(v0, v1);
          continue;
        }
        if (bias) {
          v0 += __bfloat162float(bias[col]);
          v1 += __bfloat162float(bias[col + 1]);
        }
        *reinterpret_cast<uint32_t*>(y + int64_t(row) * n + col) = pack_bf16(v0, v1);
      }
    }
  }
}

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
  *reinterpret_cast<uint32_t*>(y + i) = pack_bf16(sum.x, sum.y);
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

__global__ void w4_gather_columns_kernel(const bf16* __restrict__ x, const int* __restrict__ perm,
                                         bf16* __restrict__ out, int m, int k) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(m) * k) return;
  const int64_t row = i / k;
  const int c = int(i % k);
  out[i] = x[row * k + min(max(perm[c], 0), k - 1)];
}

template <int kMTiles>
void launch_fused(const bf16* x, const uint32_t* codes, const uint32_t* params, const bf16* bias, bf16* y,
                  float* partials, int m, int n, int k, int group, int splits, cudaStream_t stream) {
  const dim3 grid(unsigned((n + kW4TileN - 1) / kW4TileN), unsigned(splits));
  w4_fused_kernel<kMTiles>
      <<<grid, kThreads, smem_bytes<kMTiles>(), stream>>>(x, codes, params, bias, y, partials, m, n, k, group);
  FOVEA_CUDA_CHECK(cudaGetLastError());
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

int w4_sm_count(int device_index) {
  // Asked once per device: every linear_w4 needs it, and the attribute never changes.
  static std::atomic<int> cached[64] = {};
  std::atomic<int>* slot = device_index >= 0 && device_index < 64 ? &cached[device_index] : nullptr;
  if (slot && slot->load() > 0) return slot->load();
  int sms = 0;
  FOVEA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device_index));
  if (slot) slot->store(sms);
  return sms;
}

bool w4_fused_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("FOVEA_W4_FUSED");
    return !(v && std::string(v) == "0");
  }();
  return enabled;
}

void prepare_w4_kernels() {
  allow_shared_memory(w4_fused_kernel<1>, smem_bytes<1>(), true);
  allow_shared_memory(w4_fused_kernel<2>, smem_bytes<2>(), true);
  allow_shared_memory(w4_fused_kernel<4>, smem_bytes<4>(), true);
}

void launch_w4_gather_columns(const bf16* x, const int* perm, bf16* out, int m, int k, cudaStream_t stream) {
  constexpr int kBlock = 256;
  w4_gather_columns_kernel<<<blocks_for(int64_t(m) * k, kBlock), kBlock, 0, stream>>>(x, perm, out, m, k);
  FOVEA_CUDA_CHECK(cudaGetLastError());
}

void launch_w4_dequantize(const uint32_t* codes, const uint32_t* params, const int* inverse_perm, bf16* w, int rows,
                          int k, int group, cudaStream_t stream) {
  constexpr int kBlock = 256;
  const int64_t work = int64_t(rows) * ((k + 7) / 8);
  w4_dequantize_kernel<<<blocks_for(work, kBlock), kBlock, 0, stream>>>(codes, params, inverse_perm, w, rows, k, group);
  FOVEA_CUDA_CHECK(cudaGetLastError());
}

void launch_w4_fused(const bf16* x, const uint32_t* codes, const uint32_t* params, const bf16* bias, bf16* y,
                     float* partials, int m, int n, int k, int group, int splits, cudaStream_t stream) {
  if (m <= 16) {
    launch_fused<1>(x, codes, params, bias, y, partials, m, n, k, group, splits, stream);
  } else if (m <= 32) {
    launch_fused<2>(x, codes, params, bias, y, partials, m, n, k, group, splits, stream);
  } else {
    launch_fused<4>(x, codes, params, bias, y, partials, m, n, k, group, splits, stream);
  }
  if (splits > 1) {
    constexpr int kBlock = 256;
    w4_reduce_kernel<<<blocks_for(int64_t(m) * n / 2, kBlock), kBlock, 0, stream>>>(partials, bias, y, m, n, splits);
    FOVEA_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace fovea::cuda
