// Device-resident image embeddings: a pool of `tiles` slots of `rows_per_tile` rows each (one ViT tile's
// projector output), allocated once. An image takes any free slots, not necessarily adjacent, so a freed image
// never fragments the pool; its handle maps its row r to slot slots[r / rows_per_tile].
#pragma once
#include <cstdint>
#include <map>
#include <vector>

#include "backend/backend.h"

namespace fovea {

class VisionPool {
 public:
  VisionPool(Backend& backend, int tiles, int rows_per_tile, int hidden);

  int capacity_tiles() const { return int(tile_free_.size()); }
  int free_tiles() const { return free_count_; }
  int rows_per_tile() const { return rows_per_tile_; }
  size_t bytes() const { return storage_.nbytes(); }

  // Takes `tiles` free slots and returns a new handle owning them; throws when fewer are free.
  int64_t acquire(int tiles);
  void release(int64_t handle);  // throws on an unknown handle
  bool contains(int64_t handle) const { return images_.count(handle) != 0; }
  const std::vector<int>& slots(int64_t handle) const;  // throws on an unknown handle
  Tensor slot_rows(int slot) const;                     // [rows_per_tile, hidden] view of one slot

 private:
  Tensor storage_;  // [tiles * rows_per_tile, hidden]
  int rows_per_tile_;
  std::vector<bool> tile_free_;
  int free_count_;
  int64_t next_handle_ = 1;
  std::map<int64_t, std::vector<int>> images_;
};

}  // namespace fovea
