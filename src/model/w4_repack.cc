#include "model/w4_repack.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "backend/w4_layout.h"
#include "core/thread_pool.h"

namespace fovea {
namespace {

using w4::kAwqNibbleOfColumn;
using w4::kPerWord;

inline int nibble_at(uint32_t word, int i) { return int((word >> (4 * i)) & 0xFu); }

// A scale as the 16 bits linear_w4 keeps: its own bits when F16 / BF16, else the F16 or BF16 value equal to it.
struct ScaleBits {
  uint16_t bits = 0;
  bool bf16 = false;
};

bool scale_bits_of(const Tensor& scales, int64_t i, ScaleBits* out) {
  if (scales.dtype == DType::F16 || scales.dtype == DType::BF16) {
    *out = {scales.ptr<const uint16_t>()[i], scales.dtype == DType::BF16};
    return true;
  }
  const float v = scales.ptr<const float>()[i];
  if (f16_to_f32(f32_to_f16(v)) == v) {
    *out = {f32_to_f16(v), false};
    return true;
  }
  if (bf16_to_f32(f32_to_bf16(v)) == v) {
    *out = {f32_to_bf16(v), true};
    return true;
  }
  return false;
}

// The stored column order: input columns sorted by group, stably. Empty when that is the input order; false when
// the groups are not all `group` columns long (then no contiguous layout exists).
bool column_order(const std::vector<int32_t>& group_of_row, int64_t group, std::vector<int32_t>* order) {
  const int64_t in = int64_t(group_of_row.size());
  order->resize(size_t(in));
  std::iota(order->begin(), order->end(), 0);
  std::stable_sort(order->begin(), order->end(),
                   [&](int32_t a, int32_t b) { return group_of_row[size_t(a)] < group_of_row[size_t(b)]; });
  bool identity = true;
  for (int64_t c = 0; c < in; ++c) {
    if (group_of_row[size_t((*order)[size_t(c)])] != c / group) return false;
    identity = identity && (*order)[size_t(c)] == c;
  }
  if (identity) order->clear();
  return true;
}

// Reads code q(input row k, output row n) and zero z(group g, output row n) of either checkpoint layout.
struct PackedReader {
  const uint32_t* qweight;
  const uint32_t* qzeros;
  int64_t out;
  bool awq;
  uint32_t zero_offset;  // GPTQ v1: the stored zeros word is the true word minus this (w4_dequant.h)

  int q(int64_t k, int64_t n) const {
    if (awq) return nibble_at(qweight[k * (out / kPerWord) + n / kPerWord], kAwqNibbleOfColumn[n % kPerWord]);
    return nibble_at(qweight[(k / kPerWord) * out + n], int(k % kPerWord));
  }
  int z(int64_t g, int64_t n) const {
    const uint32_t word = qzeros[g * (out / kPerWord) + n / kPerWord];
    if (awq) return nibble_at(word, kAwqNibbleOfColumn[n % kPerWord]);
    return nibble_at(word + zero_offset, int(n % kPerWord));  // wraps mod 2^32 like the dequantization
  }
};

}  // namespace

bool plan_repack_w4(const PackedW4Linear& packed, const CheckpointQuantization& q, const std::string& where,
                    W4RepackPlan* plan, std::string* why_not) {
  const w4::PackedDims d = w4::packed_dims(packed, q, where);
  plan->dims = d;
  if (d.in % d.group != 0) {
    *why_not = str(d.in, " input rows are not a multiple of the group size ", d.group);
    return false;
  }
  if (!column_order(w4::input_groups(packed, d, where), d.group, &plan->order)) {
    *why_not = "its g_idx groups are not all group_size rows long";
    return false;
  }
  if (packed.scales.dtype == DType::F16 || packed.scales.dtype == DType::BF16) return true;
  ScaleBits bits;
  for (int64_t i = 0; i < d.groups * d.out; ++i) {
    if (!scale_bits_of(packed.scales, i, &bits)) {
      *why_not = "its float32 scales are not 16-bit values";
      return false;
    }
  }
  return true;
}

bool repack_w4(const PackedW4Linear& packed, const CheckpointQuantization& q, const std::string& where,
               W4HostLinear* out, std::string* why_not) {
  W4RepackPlan plan;
  if (!plan_repack_w4(packed, q, where, &plan, why_not)) return false;
  const w4::PackedDims& d = plan.dims;
  const std::vector<int32_t>& order = plan.order;
  std::vector<ScaleBits> scales(size_t(d.groups * d.out));
  for (int64_t i = 0; i < d.groups * d.out; ++i) scale_bits_of(packed.scales, i, &scales[size_t(i)]);
  const PackedReader reader{packed.qweight.ptr<const uint32_t>(), packed.qzeros.ptr<const uint32_t>(), d.out,
                            q.method == WeightQuantMethod::Awq, q.zeros_minus_one ? w4::kV1ZeroOffset : 0u};
  std::vector<int64_t> stored_of(size_t(d.in));  // stored column of each input row
  for (int64_t c = 0; c < d.in; ++c) stored_of[size_t(order.empty() ? c : order[size_t(c)])] = c;

  const int64_t words = w4::code_words(d.in);
  W4HostLinear r{
      Tensor::host(DType::I32, {d.out, words}), Tensor::host(DType::I32, {d.out, d.groups}), {}, d.in, d.group};
  auto* codes = r.codes.ptr<uint32_t>();
  auto* params = r.params.ptr<uint32_t>();
  // Eight output rows per task: they read the same checkpoint words (AWQ) or adjacent ones (GPTQ).
  ThreadPool::global().parallel_for(
      d.out / kPerWord,
      [&](int64_t begin, int64_t end) {
        for (int64_t n = begin * kPerWord; n < end * kPerWord; ++n) {
          uint32_t* row = codes + n * words;
          for (int64_t k = 0; k < d.in; ++k) {
            const w4::CodeSlot slot = w4::code_slot(stored_of[size_t(k)]);
            row[slot.word] |= uint32_t(reader.q(k, n)) << slot.shift;
          }
          for (int64_t g = 0; g < d.groups; ++g) {
            const ScaleBits s = scales[size_t(g * d.out + n)];
            params[n * d.groups + g] = w4::make_param(s.bits, s.bf16, reader.z(g, n));
          }
        }
      },
      4);
  if (!order.empty()) {
    r.perm = Tensor::host(DType::I32, {d.in});
    std::copy(order.begin(), order.end(), r.perm.ptr<int32_t>());
  }
  *out = std::move(r);
  return true;
}

Tensor inverse_permutation(const Tensor& perm) {
  FOVEA_CHECK(perm.dtype == DType::I32 && perm.rank() == 1, "inverse_permutation: ", dtype_name(perm.dtype), " ",
              shape_str(perm.shape));
  const int64_t n = perm.numel();
  Tensor inv = Tensor::host(DType::I32, {n});
  std::vector<bool> seen(size_t(n), false);
  for (int64_t c = 0; c < n; ++c) {
    const int32_t p = perm.ptr<const int32_t>()[c];
    FOVEA_CHECK(p >= 0 && p < n && !seen[size_t(p)], "inverse_permutation: not a permutation of 0..", n - 1);
    seen[size_t(p)] = true;
    inv.ptr<int32_t>()[p] = int32_t(c);
  }
  return inv;
}

}  // namespace fovea
