// The v2 fused W4A16 kernel: 8 warps x 16 weight rows per 128-row block, every loop bound and group position a
// compile-time constant (gemm_w4.h says why it replaced v1).
#include "backend/cuda/attention_mma.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dependent_launch.cuh"
#include "backend/cuda/gemm_w4.h"
#include "backend/cuda/gemm_w4_device.cuh"
#include "backend/cuda/gemm_w4_v2.h"
#include "backend/cuda/kernel_utils.cuh"

namespace fovea::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kWarpN = kW4TileN / kWarps;  // 16 weight rows per warp: two n8 tiles
constexpr int kNTiles = kWarpN / 8;
constexpr int kCodeCopies = kW4TileN * (kW4TileK / 32);  // 16-byte copies of a stage's codes
static_assert(kCodeCopies % kThreads == 0, "every thread copies the same number of code parts");

// kMTiles: 16-row tiles of x (M <= 16 * kMTiles). kStageGroups: quantization groups per 128-column stage (1 when
// group >= 128, else 128 / group: 2, 4 or 8).
template <int kMTiles, int kStageGroups>
struct Tiling {
  static constexpr int kGroupColumns = kW4TileK / kStageGroups;                  // columns per group within a stage
  static constexpr int kParamStride = kStageGroups == 1 ? 1 : kStageGroups + 1;  // odd: rows on distinct banks
  static constexpr int kCodeBytes = kW4TileN * w4_device::kCodeStride * 4;
  static constexpr int kParamBytes = (kW4TileN * kParamStride * 4 + 15) / 16 * 16;
  static constexpr int kXBytes = kMTiles * 16 * w4_device::kXStride * 2;
  static constexpr int kStageBytes = kCodeBytes + kParamBytes + kXBytes;
  // 3 stages at M = 64 keep two blocks (16 warps) per SM; the smaller x tiles leave room for 4.
  static constexpr int kStages = kMTiles == 4 ? 3 : 4;
  static constexpr int kSmemBytes = kStages * kStageBytes;
  static constexpr int kParamCopies = kW4TileN * kStageGroups;
  static_assert(kCodeBytes % 16 == 0 && kXBytes % 16 == 0, "stage regions stay 16-byte aligned");
  static_assert(2 * (kSmemBytes + 1024) <= 228 * 1024, "two blocks fit one SM");
};

template <int kMTiles, int kStageGroups>
__global__ void __launch_bounds__(kThreads, kMTiles == 1 ? 3 : 2)
    w4_fused_v2_kernel(const bf16* __restrict__ x, const uint32_t* __restrict__ codes,
                       const uint32_t* __restrict__ params, const bf16* __restrict__ bias, bf16* __restrict__ y,
                       float* __restrict__ partials, int m, int n, int k, int group) {
  using T = Tiling<kMTiles, kStageGroups>;
  extern __shared__ __align__(16) unsigned char smem[];
  const int n0 = int(blockIdx.x) * kW4TileN;
  const w4_device::StageRange stages = w4_device::split_stages(k);
  const int kt_begin = stages.begin, kt_count = stages.count;
  const int words_per_row = k / 8, groups = k / group;
  const int tid = int(threadIdx.x), warp = tid / 32, lane = tid % 32;

  auto codes_of = [&](int slot) { return reinterpret_cast<uint32_t*>(smem + slot * T::kStageBytes); };
  auto params_of = [&](int slot) { return reinterpret_cast<uint32_t*>(smem + slot * T::kStageBytes + T::kCodeBytes); };
  auto x_of = [&](int slot) {
    return reinterpret_cast<bf16*>(smem + slot * T::kStageBytes + T::kCodeBytes + T::kParamBytes);
  };

  // The weight side of stage kt (codes and params: nothing upstream writes them).
  auto load_weights = [&](int slot, int kt) {
    const int k0 = kt * kW4TileK;
    uint32_t* s_codes = codes_of(slot);
#pragma unroll
    for (int r = 0; r < kCodeCopies / kThreads; ++r) {
      const int i = tid + r * kThreads, row = i / 4, part = i % 4;  // 4 x 16 bytes per weight row
      const bool valid = n0 + row < n;
      const uint32_t* src = valid ? codes + int64_t(n0 + row) * words_per_row + k0 / 8 + part * 4 : codes;
      mma_detail::cp_async16(s_codes + row * w4_device::kCodeStride + part * 4, src, valid);
    }
    uint32_t* s_params = params_of(slot);
    // The stage's first group; group == 128 (AWQ's and GPTQ's usual) skips a division by a runtime value.
    const int g0 = kStageGroups > 1 ? kt * kStageGroups : group == kW4TileK ? kt : k0 / group;
#pragma unroll
    for (int r = 0; r < (T::kParamCopies + kThreads - 1) / kThreads; ++r) {
      const int i = tid + r * kThreads;
      if (T::kParamCopies % kThreads != 0 && i >= T::kParamCopies) break;
      const int row = i / kStageGroups, gi = i % kStageGroups;
      const bool valid = n0 + row < n;
      const uint32_t* src = valid ? params + int64_t(n0 + row) * groups + g0 + gi : params;
      w4_device::cp_async4(s_params + row * T::kParamStride + gi, src, valid);
    }
  };
  // The activation side of stage kt: x's rows past m are zero-filled.
  auto load_x = [&](int slot, int kt) {
    w4_device::load_x_stage<kMTiles, kThreads>(x_of(slot), x, m, k, kt * kW4TileK, tid);
  };

  const int g = lane / 4, t = lane % 4;
  const int warp_row = warp * kWarpN + g;  // this thread's weight row in n8 tile 0 (tile j: + 8 j)
  float acc[kMTiles][kNTiles][4] = {};
  auto compute_stage = [&](int slot) {
    const uint32_t* s_codes = codes_of(slot);
    const uint32_t* s_params = params_of(slot);
    const bf16* s_x = x_of(slot);
    w4_device::GroupOperands ops[kNTiles];
#pragma unroll
    for (int chunk = 0; chunk < kW4TileK / 32; ++chunk) {
      uint32_t words[kNTiles];
#pragma unroll
      for (int j = 0; j < kNTiles; ++j) words[j] = s_codes[(warp_row + j * 8) * w4_device::kCodeStride + chunk * 4 + t];
#pragma unroll
      for (int step = 0; step < 2; ++step) {
        const int kk = chunk * 32 + step * 16;  // column within the stage: a compile-time constant
        if (kk % T::kGroupColumns == 0) {
#pragma unroll
          for (int j = 0; j < kNTiles; ++j)
            ops[j] = w4_device::group_operands(s_params[(warp_row + j * 8) * T::kParamStride + kk / T::kGroupColumns]);
        }
        uint32_t b[kNTiles][2];
#pragma unroll
        for (int j = 0; j < kNTiles; ++j) {
          // b[j][0]: columns 2t, 2t + 1 (nibbles 2 step, + 4); b[j][1]: columns 2t + 8, 2t + 9 (the next two).
          b[j][0] = w4_device::dequantize_biased(w4_device::biased_codes(words[j] >> (8 * step)), ops[j]);
          b[j][1] = w4_device::dequantize_biased(w4_device::biased_codes(words[j] >> (8 * step + 4)), ops[j]);
        }
        w4_device::multiply_step(acc, s_x, kk, lane, b);
      }
    }
  };

  // Prologue: the weights of the first stages stream in before the upstream kernel (which writes x) is done;
  // stage s's x joins cp.async group s, so group 0 holds every prologue weight stage (waited for at once).
#pragma unroll
  for (int s = 0; s < T::kStages - 1; ++s)
    if (s < kt_count) load_weights(s, kt_begin + s);
  wait_for_upstream();
#pragma unroll
  for (int s = 0; s < T::kStages - 1; ++s) {
    if (s < kt_count) load_x(s, kt_begin + s);
    mma_detail::cp_async_commit();
  }
  for (int it = 0; it < kt_count; ++it) {
    mma_detail::cp_async_wait<T::kStages - 2>();
    __syncthreads();  // stage `it` landed for every thread; stage it - 1's slot is free again
    const int next = it + T::kStages - 1;
    if (next < kt_count) {
      load_weights(next % T::kStages, kt_begin + next);
      load_x(next % T::kStages, kt_begin + next);
    }
    mma_detail::cp_async_commit();
    compute_stage(it % T::kStages);
  }
  mma_detail::cp_async_wait<0>();
  release_downstream();

  w4_device::store_accumulators(acc, n0 + warp * kWarpN, lane, bias, y, partials, m, n);
}

template <int kMTiles, int kStageGroups>
void prepare() {
  allow_shared_memory(w4_fused_v2_kernel<kMTiles, kStageGroups>, Tiling<kMTiles, kStageGroups>::kSmemBytes, true);
}

template <int kMTiles>
void prepare_all_groups() {
  prepare<kMTiles, 1>();
  prepare<kMTiles, 2>();
  prepare<kMTiles, 4>();
  prepare<kMTiles, 8>();
}

template <int kMTiles, int kStageGroups>
void launch(const bf16* x, const uint32_t* codes, const uint32_t* params, const bf16* bias, bf16* y, float* partials,
            int m, int n, int k, int group, int splits, cudaStream_t stream) {
  const dim3 grid(unsigned((n + kW4TileN - 1) / kW4TileN), unsigned(splits));
  launch_dependent(w4_fused_v2_kernel<kMTiles, kStageGroups>, grid, dim3(kThreads),
                   size_t(Tiling<kMTiles, kStageGroups>::kSmemBytes), stream, x, codes, params, bias, y, partials, m, n,
                   k, group);
}

template <int kMTiles>
void launch_for_group(const bf16* x, const uint32_t* codes, const uint32_t* params, const bf16* bias, bf16* y,
                      float* partials, int m, int n, int k, int group, int splits, cudaStream_t stream) {
  // w4_fused_supported admits group 16, 32, 64 or a multiple of 128.
  if (group >= kW4TileK) {
    launch<kMTiles, 1>(x, codes, params, bias, y, partials, m, n, k, group, splits, stream);
  } else if (group == 64) {
    launch<kMTiles, 2>(x, codes, params, bias, y, partials, m, n, k, group, splits, stream);
  } else if (group == 32) {
    launch<kMTiles, 4>(x, codes, params, bias, y, partials, m, n, k, group, splits, stream);
  } else {
    launch<kMTiles, 8>(x, codes, params, bias, y, partials, m, n, k, group, splits, stream);
  }
}

}  // namespace

void prepare_w4_v2_kernels() {
  prepare_all_groups<1>();
  prepare_all_groups<2>();
  prepare_all_groups<4>();
}

void launch_w4_fused_v2(const bf16* x, const uint32_t* codes, const uint32_t* params, const bf16* bias, bf16* y,
                        float* partials, int m, int n, int k, int group, int splits, cudaStream_t stream) {
  if (m <= 16) {
    launch_for_group<1>(x, codes, params, bias, y, partials, m, n, k, group, splits, stream);
  } else if (m <= 32) {
    launch_for_group<2>(x, codes, params, bias, y, partials, m, n, k, group, splits, stream);
  } else {
    launch_for_group<4>(x, codes, params, bias, y, partials, m, n, k, group, splits, stream);
  }
}

}  // namespace fovea::cuda
