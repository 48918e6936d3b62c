#include "quantize/row_sampler.h"

#include <algorithm>
#include <cstring>

#include "core/dtype.h"
#include "core/error.h"

namespace fovea {
namespace {

uint64_t mix64(uint64_t x) {  // splitmix64's finaliser: every input bit reaches every output bit
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

RowSampler::RowSampler(int64_t capacity, int64_t width, uint64_t seed)
    : capacity_(capacity), width_(width), seed_(seed) {
  FOVEA_CHECK(capacity > 0 && width > 0, "row sampler needs a positive capacity and width");
}

uint64_t RowSampler::hash_row(const float* row) const {
  uint64_t h = mix64(seed_ ^ uint64_t(width_));
  int64_t i = 0;
  for (; i + 2 <= width_; i += 2) {
    uint64_t pair;
    std::memcpy(&pair, row + i, 8);
    h = mix64(h ^ pair);
  }
  if (i < width_) {
    uint32_t last;
    std::memcpy(&last, row + i, 4);
    h = mix64(h ^ last);
  }
  return h;
}

void RowSampler::add(const float* rows, int64_t count) {
  FOVEA_CHECK(width_ > 0, "row sampler used before it was sized");
  for (int64_t r = 0; r < count; ++r, ++seen_) {
    const float* row = rows + r * width_;
    const uint64_t h = hash_row(row);
    int64_t slot;
    if (int64_t(heap_.size()) < capacity_) {
      slot = int64_t(heap_.size());
      if (storage_.empty()) storage_.reserve(size_t(capacity_ * width_));
      storage_.resize(size_t((slot + 1) * width_));
    } else {
      if (h >= heap_.front().first) continue;  // not among the smallest hashes so far
      std::pop_heap(heap_.begin(), heap_.end());
      slot = heap_.back().second;
      heap_.pop_back();
    }
    uint16_t* dst = storage_.data() + slot * width_;
    for (int64_t i = 0; i < width_; ++i) dst[i] = f32_to_bf16(row[i]);
    heap_.emplace_back(h, slot);
    std::push_heap(heap_.begin(), heap_.end());
  }
}

std::vector<float> RowSampler::rows_f32() const {
  std::vector<std::pair<uint64_t, int64_t>> order = heap_;
  std::sort(order.begin(), order.end());
  std::vector<float> out(order.size() * size_t(width_));
  float* dst = out.data();
  for (const auto& [hash, slot] : order) {
    const uint16_t* src = storage_.data() + slot * width_;
    for (int64_t i = 0; i < width_; ++i) *dst++ = bf16_to_f32(src[i]);
  }
  return out;
}

}  // namespace fovea
