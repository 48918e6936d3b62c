#include "backend/fp8_recipe.h"

#include <algorithm>
#include <cmath>

#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace fovea {

Shape fp8_weight_scale_shape(Fp8Scaling scaling, int64_t n, int64_t k) {
  switch (scaling) {
    case Fp8Scaling::Tensor: return {1};
    case Fp8Scaling::Channel:
    case Fp8Scaling::ChannelAct128: return {n};
    case Fp8Scaling::Block: return {fp8_blocks(n), fp8_block_scale_ld(k)};
  }
  FOVEA_FAIL("unknown FP8 scaling ", int(scaling));
}

const char* fp8_scaling_name(Fp8Scaling scaling) {
  switch (scaling) {
    case Fp8Scaling::Tensor: return "tensor";
    case Fp8Scaling::Channel: return "channel";
    case Fp8Scaling::Block: return "block";
    case Fp8Scaling::ChannelAct128: return "channel-act128";
  }
  return "?";
}

void quantize_e4m3_blocks(const float* v, int64_t rows, int64_t cols, int64_t block_rows, int64_t block_cols,
                          uint8_t* codes, float* scales, int64_t scale_ld) {
  FOVEA_CHECK(block_rows > 0 && block_cols > 0, "quantize_e4m3_blocks: empty blocks");
  const int64_t row_blocks = (rows + block_rows - 1) / block_rows, col_blocks = (cols + block_cols - 1) / block_cols;
  FOVEA_CHECK(scale_ld >= col_blocks, "quantize_e4m3_blocks: scale_ld ", scale_ld, " < ", col_blocks);
  // One task per band of block rows; each band's blocks are independent, so the split changes nothing.
  const int64_t min_bands = std::max<int64_t>(1, (int64_t(1) << 16) / std::max<int64_t>(1, block_rows * cols));
  ThreadPool::global().parallel_for(row_blocks, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t r0 = i * block_rows, r1 = std::min(rows, r0 + block_rows);
      for (int64_t j = 0; j < col_blocks; ++j) {
        const int64_t c0 = j * block_cols, c1 = std::min(cols, c0 + block_cols);
        float absmax = 0.f;
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t c = c0; c < c1; ++c) absmax = std::max(absmax, std::fabs(v[r * cols + c]));
        const float scale = absmax > 0.f ? absmax / kE4M3Max : 1.f;
        scales[i * scale_ld + j] = scale;
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t c = c0; c < c1; ++c) codes[r * cols + c] = f32_to_e4m3(v[r * cols + c] / scale);
      }
    }
  }, min_bands);
}

Fp8HostWeight quantize_fp8_weight(const Tensor& w, Fp8Scaling scaling) {
  FOVEA_CHECK(w.rank() == 2 && w.dtype == DType::F32 && w.device == Device::CPU,
              "quantize_fp8_weight: needs a host F32 [N, K] tensor, got ", dtype_name(w.dtype), " ",
              shape_str(w.shape));
  const int64_t n = w.dim(0), k = w.dim(1);
  Fp8HostWeight q{Tensor::host(DType::F8E4M3, {n, k}), Tensor::host(DType::F32, fp8_weight_scale_shape(scaling, n, k))};
  float* scales = q.scale.ptr<float>();
  std::fill(scales, scales + q.scale.numel(), 1.f);
  switch (scaling) {
    case Fp8Scaling::Tensor: scales[0] = quantize_e4m3(w.ptr<float>(), w.numel(), q.codes.ptr<uint8_t>()); break;
    case Fp8Scaling::Channel:
    case Fp8Scaling::ChannelAct128:
      quantize_e4m3_blocks(w.ptr<float>(), n, k, 1, k, q.codes.ptr<uint8_t>(), scales, 1);
      break;
    case Fp8Scaling::Block:
      quantize_e4m3_blocks(w.ptr<float>(), n, k, kFp8Block, kFp8Block, q.codes.ptr<uint8_t>(), scales,
                           fp8_block_scale_ld(k));
      break;
  }
  return q;
}

}  // namespace fovea
