// A bounded, order-independent sample of activation rows for calibration: of all the rows a linear sees, keep the
// `capacity` whose seeded 64-bit hash is smallest (bottom-k sampling). Every row of every calibration sample has
// the same chance to be kept, and the kept set does not depend on the order the engine's batches deliver rows
// in, so a run is deterministic however requests were scheduled. Rows are stored as bf16 (what the model's
// activations are on the GPU anyway), half the memory of f32.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace fovea {

class RowSampler {
 public:
  static constexpr uint64_t kDefaultSeed = 0x5eed0f0ea0ca1b00ull;

  RowSampler() = default;
  RowSampler(int64_t capacity, int64_t width, uint64_t seed = kDefaultSeed);

  // Offers `count` contiguous f32 rows of `width` elements.
  void add(const float* rows, int64_t count);

  int64_t width() const { return width_; }
  int64_t seen() const { return seen_; }  // rows offered so far
  int64_t kept() const { return int64_t(heap_.size()); }
  size_t bytes() const { return storage_.size() * sizeof(uint16_t); }  // of the rows kept

  // The kept rows as f32 [kept, width], ordered by hash (so the same data gives the same bytes).
  std::vector<float> rows_f32() const;

 private:
  uint64_t hash_row(const float* row) const;

  int64_t capacity_ = 0, width_ = 0;
  uint64_t seed_ = kDefaultSeed;
  int64_t seen_ = 0;
  std::vector<std::pair<uint64_t, int64_t>> heap_;  // max-heap of (hash, slot): the top is the next to go
  std::vector<uint16_t> storage_;                   // [capacity, width] bf16, slot-indexed
};

}  // namespace fovea
