#include "model/w4_pack.h"

#include <algorithm>
#include <cmath>

namespace fovea {
namespace {

using w4::kAwqNibbleOfColumn;
using w4::kPerWord;
using w4::kV1ZeroOffset;
constexpr int kMaxQ = 15;

int quantize_one(float w, float scale, int zero) {
  return std::clamp(int(std::nearbyint(w / scale)) + zero, 0, kMaxQ);  // nearbyint: half to even, like torch.round
}

float as_f16(float v) { return f16_to_f32(f32_to_f16(v)); }

// Packs values[j] for the 8 columns 8c..8c+7 of one row; `nibble_of[j]` says where column j goes.
uint32_t pack_word(const int* values, const int* nibble_of) {
  uint32_t word = 0;
  for (int j = 0; j < kPerWord; ++j) word |= uint32_t(values[j]) << (4 * nibble_of[j]);
  return word;
}

constexpr int kPlainOrder[kPerWord] = {0, 1, 2, 3, 4, 5, 6, 7};

// zeros [groups, out] -> packed [groups, out/8] words.
Tensor pack_zeros(const std::vector<int>& zeros, int64_t groups, int64_t out, const int* nibble_of, uint32_t minus) {
  Tensor t = Tensor::host(DType::I32, {groups, out / kPerWord});
  auto* dst = t.ptr<uint32_t>();
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t c = 0; c < out / kPerWord; ++c)
      dst[g * (out / kPerWord) + c] = pack_word(&zeros[size_t(g * out + c * kPerWord)], nibble_of) - minus;
  return t;
}

void check_dims(int64_t out, int64_t in, int64_t group_rows_multiple) {
  FOVEA_CHECK(out > 0 && in > 0 && out % kPerWord == 0 && in % group_rows_multiple == 0, "4-bit packing of a [", out,
              ", ", in, "] weight needs out a multiple of 8 and in a multiple of ", group_rows_multiple);
}

}  // namespace

PackedW4Linear pack_awq(const float* w, int64_t out, int64_t in, int64_t group) {
  check_dims(out, in, group);
  const int64_t groups = in / group;
  std::vector<int> zeros(size_t(groups * out)), q(size_t(in * out));  // q in [in, out] order
  Tensor scales = Tensor::host(DType::F16, {groups, out});
  for (int64_t n = 0; n < out; ++n) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* row = w + n * in + g * group;
      const auto [lo, hi] = std::minmax_element(row, row + group);
      const float scale = as_f16(std::max(*hi - *lo, 1e-5f) / kMaxQ);
      const int zero = std::clamp(int(std::nearbyint(-*lo / scale)), 0, kMaxQ);
      scales.ptr<uint16_t>()[g * out + n] = f32_to_f16(scale);
      zeros[size_t(g * out + n)] = zero;
      for (int64_t k = 0; k < group; ++k) q[size_t((g * group + k) * out + n)] = quantize_one(row[k], scale, zero);
    }
  }
  Tensor qweight = Tensor::host(DType::I32, {in, out / kPerWord});
  for (int64_t k = 0; k < in; ++k)
    for (int64_t c = 0; c < out / kPerWord; ++c)
      qweight.ptr<uint32_t>()[k * (out / kPerWord) + c] =
          pack_word(&q[size_t(k * out + c * kPerWord)], kAwqNibbleOfColumn);
  return {qweight, pack_zeros(zeros, groups, out, kAwqNibbleOfColumn, 0), scales, {}};
}

PackedW4Linear pack_gptq(const float* w, int64_t out, int64_t in, const std::vector<int32_t>& g_idx, int64_t groups,
                         bool v1_zeros) {
  check_dims(out, in, kPerWord);
  FOVEA_CHECK(int64_t(g_idx.size()) == in, "pack_gptq: g_idx has ", g_idx.size(), " entries for ", in, " rows");
  constexpr int kSymZero = (kMaxQ + 1) / 2;
  std::vector<int> zeros(size_t(groups * out), kSymZero);
  Tensor scales = Tensor::host(DType::F16, {groups, out});
  std::vector<float> scale(static_cast<size_t>(groups));
  Tensor qweight = Tensor::host(DType::I32, {in / kPerWord, out});
  for (int64_t n = 0; n < out; ++n) {
    const float* row = w + n * in;
    std::vector<float> absmax(size_t(groups), 0.0f);
    for (int64_t k = 0; k < in; ++k) {
      FOVEA_CHECK(g_idx[size_t(k)] >= 0 && g_idx[size_t(k)] < groups, "pack_gptq: g_idx[", k, "] out of range");
      absmax[size_t(g_idx[size_t(k)])] = std::max(absmax[size_t(g_idx[size_t(k)])], std::fabs(row[k]));
    }
    for (int64_t g = 0; g < groups; ++g) {
      // GPTQ's symmetric range [-absmax, absmax] over 15 steps; an all-zero group gets GPTQ's [-1, 1].
      const float range = absmax[size_t(g)] > 0 ? 2 * absmax[size_t(g)] : 2.0f;
      scale[size_t(g)] = as_f16(range / kMaxQ);
      scales.ptr<uint16_t>()[g * out + n] = f32_to_f16(scale[size_t(g)]);
    }
    for (int64_t r = 0; r < in / kPerWord; ++r) {
      int values[kPerWord];
      for (int i = 0; i < kPerWord; ++i) {
        const int64_t k = r * kPerWord + i;
        values[i] = quantize_one(row[k], scale[size_t(g_idx[size_t(k)])], kSymZero);
      }
      qweight.ptr<uint32_t>()[r * out + n] = pack_word(values, kPlainOrder);
    }
  }
  Tensor g_idx_tensor = Tensor::host(DType::I32, {in});
  std::copy(g_idx.begin(), g_idx.end(), g_idx_tensor.ptr<int32_t>());
  return {qweight, pack_zeros(zeros, groups, out, kPlainOrder, v1_zeros ? kV1ZeroOffset : 0u), scales, g_idx_tensor};
}

PackedW4Linear pack_awq_codes(const W4Codes& c) {
  check_dims(c.out, c.in, kPerWord);
  FOVEA_CHECK(c.groups > 0 && c.in % c.groups == 0, "pack_awq_codes: ", c.in, " rows in ", c.groups, " groups");
  const int64_t group = c.in / c.groups, words = c.out / kPerWord;
  for (int64_t k = 0; k < c.in; ++k)
    FOVEA_CHECK(c.g_idx[size_t(k)] == k / group, "pack_awq_codes: AWQ needs row k in group k / ", group);
  Tensor scales = Tensor::host(DType::F16, {c.groups, c.out});
  for (int64_t i = 0; i < c.groups * c.out; ++i) scales.ptr<uint16_t>()[i] = f32_to_f16(c.scales[size_t(i)]);
  Tensor qweight = Tensor::host(DType::I32, {c.in, words});
  for (int64_t k = 0; k < c.in; ++k)
    for (int64_t w = 0; w < words; ++w) {
      int values[kPerWord];
      for (int j = 0; j < kPerWord; ++j) values[j] = c.q[size_t((w * kPerWord + j) * c.in + k)];
      qweight.ptr<uint32_t>()[k * words + w] = pack_word(values, kAwqNibbleOfColumn);
    }
  return {qweight, pack_zeros(c.zeros, c.groups, c.out, kAwqNibbleOfColumn, 0), scales, {}};
}

PackedW4Linear pack_gptq_codes(const W4Codes& c, bool v1_zeros) {
  check_dims(c.out, c.in, kPerWord);
  FOVEA_CHECK(int64_t(c.g_idx.size()) == c.in, "pack_gptq_codes: g_idx has ", c.g_idx.size(), " entries for ", c.in,
              " rows");
  Tensor scales = Tensor::host(DType::F16, {c.groups, c.out});
  for (int64_t i = 0; i < c.groups * c.out; ++i) scales.ptr<uint16_t>()[i] = f32_to_f16(c.scales[size_t(i)]);
  Tensor qweight = Tensor::host(DType::I32, {c.in / kPerWord, c.out});
  for (int64_t r = 0; r < c.in / kPerWord; ++r)
    for (int64_t n = 0; n < c.out; ++n) {
      int values[kPerWord];
      for (int i = 0; i < kPerWord; ++i) values[i] = c.q[size_t(n * c.in + r * kPerWord + i)];
      qweight.ptr<uint32_t>()[r * c.out + n] = pack_word(values, kPlainOrder);
    }
  Tensor g_idx = Tensor::host(DType::I32, {c.in});
  std::copy(c.g_idx.begin(), c.g_idx.end(), g_idx.ptr<int32_t>());
  return {qweight, pack_zeros(c.zeros, c.groups, c.out, kPlainOrder, v1_zeros ? kV1ZeroOffset : 0u), scales, g_idx};
}

}  // namespace fovea
