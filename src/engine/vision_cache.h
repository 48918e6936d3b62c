// Device-resident image embeddings by image key (128-bit hash of the file bytes + tiling parameters), so a
// repeated image skips the ViT. Entries are pinned while a sequence still has image rows to feed; unpinned
// entries are kept in LRU order up to `capacity_tiles` and evicted first when the runner's pool needs room.
// Scheduler-thread only; releasing a handle is done through the callback (the runner owns the memory).
#pragma once
#include <cstdint>
#include <functional>
#include <list>
#include <unordered_map>

#include "core/hash.h"

namespace fovea {

class VisionCache {
 public:
  using ReleaseFn = std::function<void(int64_t handle)>;
  VisionCache(int capacity_tiles, ReleaseFn release);
  ~VisionCache();  // releases every handle it still holds

  // The handle for `key`, pinned once more, or -1 when absent. Marks the entry most recently used.
  int64_t acquire(const Hash128& key);
  // Adds a freshly encoded embedding, pinned once.
  void insert(const Hash128& key, int64_t handle, int tiles);
  void unpin(const Hash128& key);
  // Releases unpinned entries, least recently used first, until `free_tiles()` reports at least `tiles`
  // (free_tiles is asked again after each release). Returns whether that much room was made.
  bool make_room(int tiles, const std::function<int()>& free_tiles);
  // Releases every unpinned entry (e.g. when the runner's pool is to be drained).
  void clear_unpinned();

  int entries() const { return int(entries_.size()); }
  int held_tiles() const { return held_tiles_; }
  int unpinned_tiles() const { return unpinned_tiles_; }  // what make_room could free
  int pins(const Hash128& key) const;

 private:
  struct Entry {
    int64_t handle = -1;
    int tiles = 0;
    int pins = 0;
    std::list<Hash128>::iterator lru_pos;  // valid while pins == 0
  };
  void evict(std::unordered_map<Hash128, Entry, Hash128Hasher>::iterator it);
  void trim_to_capacity();

  int capacity_tiles_;
  ReleaseFn release_;
  int held_tiles_ = 0;
  int unpinned_tiles_ = 0;
  std::unordered_map<Hash128, Entry, Hash128Hasher> entries_;
  std::list<Hash128> unpinned_lru_;  // least recently used first
};

}  // namespace fovea
