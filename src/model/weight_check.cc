#include "model/weight_check.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/thread_pool.h"

namespace fovea {
namespace {

// Counts elements whose exponent bits are all ones (NaN or infinity) in [begin, end). The common case, none,
// is found with a max over the masked bits per block of 4096 (a vectorised unsigned max, ~memory speed); only a
// block that holds one is counted element by element.
template <typename Bits>
int64_t count_all_ones_exponent(const void* data, int64_t begin, int64_t end, Bits magnitude_mask, Bits exponent) {
  const Bits* p = static_cast<const Bits*>(data);
  int64_t bad = 0;
  for (int64_t block = begin; block < end; block += 4096) {
    const int64_t stop = std::min(end, block + 4096);
    Bits high = 0;
    for (int64_t i = block; i < stop; ++i) high = std::max<Bits>(high, Bits(p[i] & magnitude_mask));
    if (high < exponent) continue;
    for (int64_t i = block; i < stop; ++i) bad += Bits(p[i] & magnitude_mask) >= exponent;
  }
  return bad;
}

int64_t count_range(const Tensor& t, int64_t begin, int64_t end) {
  switch (t.dtype) {
    case DType::F32: return count_all_ones_exponent<uint32_t>(t.data, begin, end, 0x7fffffffu, 0x7f800000u);
    case DType::BF16: return count_all_ones_exponent<uint16_t>(t.data, begin, end, 0x7fff, 0x7f80);
    case DType::F16: return count_all_ones_exponent<uint16_t>(t.data, begin, end, 0x7fff, 0x7c00);
    case DType::F8E4M3: return count_all_ones_exponent<uint8_t>(t.data, begin, end, 0x7f, 0x7f);  // only NaN
    default: return 0;
  }
}

}  // namespace

int64_t count_non_finite(const Tensor& tensor) { return count_range(tensor, 0, tensor.numel()); }

void check_tensor_finite(const std::string& name, const Tensor& tensor, const std::string& model_dir) {
  // Chunks of at most 16M elements so one big embedding does not serialise the scan.
  constexpr int64_t kChunk = 16 << 20;
  if (tensor.empty()) return;
  const int64_t chunks = (tensor.numel() + kChunk - 1) / kChunk;
  std::vector<int64_t> bad(size_t(chunks), 0);
  ThreadPool::global().parallel_for(chunks, [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c)
      bad[size_t(c)] = count_range(tensor, c * kChunk, std::min(tensor.numel(), (c + 1) * kChunk));
  });
  for (int64_t b : bad)
    FOVEA_CHECK(b == 0, model_dir, ": weight ", name, " (", dtype_name(tensor.dtype),
                ") holds NaN or infinite values: the checkpoint is damaged");
}

void check_weights_finite(const ModelWeights& weights, const std::string& model_dir) {
  for (const auto& [name, ref] : weights.tensors) check_tensor_finite(name, ref.load(), model_dir);
}

}  // namespace fovea
