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

void check_weights_finite(const ModelWeights& weights, const std::string& model_dir) {
  // Work items of at most 16M elements so one big embedding does not serialise the scan.
  constexpr int64_t kChunk = 16 << 20;
  struct Item {
    const std::string* name;
    const Tensor* tensor;
    int64_t begin, end;
  };
  std::vector<Item> items;
  for (const auto& [name, t] : weights.tensors) {
    if (t.empty()) continue;
    for (int64_t b = 0; b < t.numel(); b += kChunk) items.push_back({&name, &t, b, std::min(t.numel(), b + kChunk)});
  }
  std::vector<int64_t> bad(items.size(), 0);
  ThreadPool::global().parallel_for(int64_t(items.size()), [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) bad[i] = count_range(*items[i].tensor, items[i].begin, items[i].end);
  });
  for (size_t i = 0; i < items.size(); ++i) {
    FOVEA_CHECK(bad[i] == 0, model_dir, ": weight ", *items[i].name, " (", dtype_name(items[i].tensor->dtype),
                ") holds NaN or infinite values: the checkpoint is damaged");
  }
}

}  // namespace fovea
