#include "runtime/vision_pool.h"

namespace fovea {

VisionPool::VisionPool(Backend& backend, int tiles, int rows_per_tile, int hidden)
    : rows_per_tile_(rows_per_tile), tile_free_(size_t(std::max(tiles, 0)), true), free_count_(std::max(tiles, 0)) {
  FOVEA_CHECK(tiles >= 0 && rows_per_tile > 0 && hidden > 0, "vision pool: bad sizes ", tiles, "x", rows_per_tile, "x",
              hidden);
  storage_ = backend.alloc(backend.compute_dtype(), {int64_t(tiles) * rows_per_tile, hidden});
}

int64_t VisionPool::acquire(int tiles) {
  FOVEA_CHECK(tiles > 0, "vision pool: an image needs at least one tile");
  FOVEA_CHECK(tiles <= free_count_, "vision pool: ", tiles, " tiles asked, ", free_count_, " of ", capacity_tiles(),
              " free");
  std::vector<int> taken;
  for (int slot = 0; slot < capacity_tiles() && int(taken.size()) < tiles; ++slot) {
    if (!tile_free_[size_t(slot)]) continue;
    tile_free_[size_t(slot)] = false;
    taken.push_back(slot);
  }
  free_count_ -= tiles;
  const int64_t handle = next_handle_++;
  images_[handle] = std::move(taken);
  return handle;
}

void VisionPool::release(int64_t handle) {
  auto found = images_.find(handle);
  FOVEA_CHECK(found != images_.end(), "vision pool: unknown image handle ", handle);
  for (int slot : found->second) tile_free_[size_t(slot)] = true;
  free_count_ += int(found->second.size());
  images_.erase(found);
}

const std::vector<int>& VisionPool::slots(int64_t handle) const {
  auto found = images_.find(handle);
  FOVEA_CHECK(found != images_.end(), "vision pool: unknown image handle ", handle);
  return found->second;
}

Tensor VisionPool::slot_rows(int slot) const {
  FOVEA_CHECK(slot >= 0 && slot < capacity_tiles(), "vision pool: slot ", slot, " out of range");
  return storage_.rows(int64_t(slot) * rows_per_tile_, int64_t(slot + 1) * rows_per_tile_);
}

}  // namespace fovea
