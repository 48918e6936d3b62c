#include "model/w4_dequant.h"

#include <vector>

#include "core/thread_pool.h"

namespace fovea {
namespace {

using w4::kAwqNibbleOfColumn;
using w4::kPerWord;
using w4::kV1ZeroOffset;

inline int nibble(uint32_t word, int i) { return int((word >> (4 * i)) & 0xFu); }

// Scales as float, whatever float dtype the checkpoint stores them in.
std::vector<float> scales_f32(const Tensor& scales) {
  const Tensor f = scales.to_f32();
  return std::vector<float>(f.ptr<const float>(), f.ptr<const float>() + f.numel());
}

using Shapes = w4::PackedDims;

void check_int32(const Tensor& t, const char* part, const std::string& where) {
  FOVEA_CHECK(t.dtype == DType::I32, where, ".", part, " has dtype ", dtype_name(t.dtype), ", packed 4-bit needs I32");
  FOVEA_CHECK(t.rank() == 2, where, ".", part, " has shape ", shape_str(t.shape), ", expected 2 dimensions");
}

void check_shape(const Tensor& t, const Shape& expected, const char* part, const std::string& where,
                 const char* layout) {
  FOVEA_CHECK(t.shape == expected, where, ".", part, " has shape ", shape_str(t.shape), ", ", layout, " needs ",
              shape_str(expected));
}

// Shared by both layouts: qzeros [groups, out/8] I32, scales [groups, out] float.
void check_zeros_scales(const PackedW4Linear& p, const Shapes& s, const std::string& where, const char* layout) {
  check_int32(p.qzeros, "qzeros", where);
  check_shape(p.qzeros, {s.groups, s.out / kPerWord}, "qzeros", where, layout);
  FOVEA_CHECK(p.scales.dtype == DType::F16 || p.scales.dtype == DType::BF16 || p.scales.dtype == DType::F32, where,
              ".scales has dtype ", dtype_name(p.scales.dtype), ", expected F16, BF16 or F32");
  check_shape(p.scales, {s.groups, s.out}, "scales", where, layout);
}

int64_t group_of(int group_size, int64_t in) { return group_size < 0 ? in : group_size; }

// Stores (q - z) * s at element i of the output, rounded once to its dtype.
struct StoreBf16 {
  uint16_t* dst;
  void operator()(int64_t i, float v) const { dst[i] = f32_to_bf16(v); }
};
struct StoreF32 {
  float* dst;
  void operator()(int64_t i, float v) const { dst[i] = v; }
};

// Runs body(store) with the store for `out`'s dtype, so the inner loops are compiled once per dtype.
template <typename Body>
void with_store(const Tensor& out, const Body& body) {
  if (out.dtype == DType::BF16) {
    body(StoreBf16{out.ptr<uint16_t>()});
  } else {
    body(StoreF32{out.ptr<float>()});
  }
}

Shapes check_awq(const PackedW4Linear& p, const CheckpointQuantization& q, const std::string& where) {
  check_int32(p.qweight, "qweight", where);
  Shapes s;
  s.in = p.qweight.dim(0);
  s.out = p.qweight.dim(1) * kPerWord;
  s.group = group_of(q.group_size, s.in);
  FOVEA_CHECK(s.in > 0 && s.in % s.group == 0, where, ".qweight has ", s.in,
              " input rows, not a multiple of the group size ", s.group, " (AWQ gemm needs whole groups)");
  s.groups = s.in / s.group;
  check_zeros_scales(p, s, where, "AWQ gemm [in, out/8] packing");
  FOVEA_CHECK(p.g_idx.empty(), where, ".g_idx exists but AWQ has no act-order (is this a GPTQ checkpoint?)");
  return s;
}

Tensor dequantize_awq(const PackedW4Linear& p, const CheckpointQuantization& q, DType dtype, const std::string& where) {
  const Shapes s = check_awq(p, q, where);
  Tensor out = Tensor::host(dtype, {s.out, s.in});
  const auto* qw = p.qweight.ptr<const uint32_t>();
  const auto* qz = p.qzeros.ptr<const uint32_t>();
  const std::vector<float> scales = scales_f32(p.scales);
  const int64_t words = s.out / kPerWord;  // packed columns: the unit of work (8 output rows each)
  with_store(out, [&](const auto store) {
    ThreadPool::global().parallel_for(
        words,
        [&](int64_t begin, int64_t end) {
          float zero[kPerWord], scale[kPerWord];
          for (int64_t c = begin; c < end; ++c) {
            for (int64_t g = 0; g < s.groups; ++g) {
              const uint32_t zword = qz[g * words + c];
              for (int j = 0; j < kPerWord; ++j) {
                zero[j] = float(nibble(zword, kAwqNibbleOfColumn[j]));
                scale[j] = scales[size_t(g * s.out + c * kPerWord + j)];
              }
              for (int64_t k = g * s.group; k < (g + 1) * s.group; ++k) {
                const uint32_t word = qw[k * words + c];
                for (int j = 0; j < kPerWord; ++j)
                  store((c * kPerWord + j) * s.in + k,
                        (float(nibble(word, kAwqNibbleOfColumn[j])) - zero[j]) * scale[j]);
              }
            }
          }
        },
        4);
  });
  return out;
}

// The group of every input row: g_idx when the checkpoint has one (validated), else k / group.
std::vector<int32_t> gptq_groups(const PackedW4Linear& p, const Shapes& s, const std::string& where) {
  std::vector<int32_t> groups(size_t(s.in));
  if (p.g_idx.empty()) {
    for (int64_t k = 0; k < s.in; ++k) groups[size_t(k)] = int32_t(k / s.group);
    return groups;
  }
  FOVEA_CHECK(p.g_idx.dtype == DType::I32 || p.g_idx.dtype == DType::I64, where, ".g_idx has dtype ",
              dtype_name(p.g_idx.dtype), ", expected I32 or I64");
  FOVEA_CHECK(p.g_idx.shape == Shape{s.in}, where, ".g_idx has shape ", shape_str(p.g_idx.shape),
              ", GPTQ needs one group per input row: [", s.in, "]");
  for (int64_t k = 0; k < s.in; ++k) {
    const int64_t g = p.g_idx.dtype == DType::I32 ? p.g_idx.ptr<const int32_t>()[k] : p.g_idx.ptr<const int64_t>()[k];
    FOVEA_CHECK(g >= 0 && g < s.groups, where, ".g_idx[", k, "] = ", g, " is outside the ", s.groups, " groups");
    groups[size_t(k)] = int32_t(g);
  }
  return groups;
}

Shapes check_gptq(const PackedW4Linear& p, const CheckpointQuantization& q, const std::string& where) {
  check_int32(p.qweight, "qweight", where);
  Shapes s;
  s.in = p.qweight.dim(0) * kPerWord;
  s.out = p.qweight.dim(1);
  FOVEA_CHECK(s.in > 0 && s.out > 0 && s.out % kPerWord == 0, where, ".qweight has shape ", shape_str(p.qweight.shape),
              ": GPTQ [in/8, out] needs out a multiple of 8 (qzeros packs 8 columns)");
  s.group = group_of(q.group_size, s.in);
  s.groups = (s.in + s.group - 1) / s.group;
  check_zeros_scales(p, s, where, "GPTQ [in/8, out] packing");
  FOVEA_CHECK(!q.desc_act || !p.g_idx.empty(), where, ".g_idx is missing but the config says desc_act (act-order)");
  return s;
}

Tensor dequantize_gptq(const PackedW4Linear& p, const CheckpointQuantization& q, DType dtype,
                       const std::string& where) {
  const Shapes s = check_gptq(p, q, where);
  const std::vector<int32_t> group_of_row = gptq_groups(p, s, where);

  Tensor out = Tensor::host(dtype, {s.out, s.in});
  const auto* qw = p.qweight.ptr<const uint32_t>();
  const auto* qz = p.qzeros.ptr<const uint32_t>();
  const std::vector<float> scales = scales_f32(p.scales);
  const uint32_t zero_offset = q.zeros_minus_one ? kV1ZeroOffset : 0u;
  const int64_t zero_words = s.out / kPerWord;
  with_store(out, [&](const auto store) {
    ThreadPool::global().parallel_for(
        s.out,
        [&](int64_t begin, int64_t end) {
          std::vector<float> zero(size_t(s.groups)), scale(size_t(s.groups));
          for (int64_t n = begin; n < end; ++n) {
            for (int64_t g = 0; g < s.groups; ++g) {
              const uint32_t zword = qz[g * zero_words + n / kPerWord] + zero_offset;  // wraps mod 2^32 like torch
              zero[size_t(g)] = float(nibble(zword, int(n % kPerWord)));
              scale[size_t(g)] = scales[size_t(g * s.out + n)];
            }
            for (int64_t r = 0; r < s.in / kPerWord; ++r) {
              const uint32_t word = qw[r * s.out + n];
              for (int i = 0; i < kPerWord; ++i) {
                const int64_t k = r * kPerWord + i;
                const size_t g = size_t(group_of_row[size_t(k)]);
                store(n * s.in + k, (float(nibble(word, i)) - zero[g]) * scale[g]);
              }
            }
          }
        },
        16);
  });
  return out;
}

}  // namespace

namespace w4 {

PackedDims packed_dims(const PackedW4Linear& packed, const CheckpointQuantization& q, const std::string& where) {
  FOVEA_CHECK(q.bits == 4, where, ": ", q.bits, "-bit weights are not supported (4-bit only)");
  FOVEA_CHECK(q.packed(), where, ": packed 4-bit tensors but no quantization_config says how they are packed");
  const Shapes s = q.method == WeightQuantMethod::Awq ? check_awq(packed, q, where) : check_gptq(packed, q, where);
  return {s.in, s.out, s.group, s.groups};
}

std::vector<int32_t> input_groups(const PackedW4Linear& packed, const PackedDims& d, const std::string& where) {
  return gptq_groups(packed, d, where);
}

}  // namespace w4

Tensor dequantize_w4(const PackedW4Linear& packed, const CheckpointQuantization& q, DType out_dtype,
                     const std::string& where) {
  FOVEA_CHECK(out_dtype == DType::BF16 || out_dtype == DType::F32, "dequantize_w4: output dtype ",
              dtype_name(out_dtype), " (BF16 or F32)");
  FOVEA_CHECK(q.bits == 4, where, ": ", q.bits, "-bit weights are not supported (4-bit only)");
  switch (q.method) {
    case WeightQuantMethod::Awq:
      return dequantize_awq(packed, q, out_dtype, where);
    case WeightQuantMethod::Gptq:
      return dequantize_gptq(packed, q, out_dtype, where);
    case WeightQuantMethod::None:
      break;
  }
  FOVEA_FAIL(where, ": packed 4-bit tensors but no quantization_config says how they are packed");
}

}  // namespace fovea
