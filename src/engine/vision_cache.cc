#include "engine/vision_cache.h"

#include "core/error.h"

namespace fovea {

VisionCache::VisionCache(int capacity_tiles, ReleaseFn release)
    : capacity_tiles_(capacity_tiles), release_(std::move(release)) {}

VisionCache::~VisionCache() {
  for (auto& [key, entry] : entries_) {
    try {
      release_(entry.handle);
    } catch (...) {
      // The runner may already be gone or failing; nothing more can be done for device memory here.
    }
  }
}

int64_t VisionCache::acquire(const Hash128& key) {
  const auto it = entries_.find(key);
  if (it == entries_.end()) return -1;
  Entry& e = it->second;
  if (e.pins++ == 0) {
    unpinned_lru_.erase(e.lru_pos);
    unpinned_tiles_ -= e.tiles;
  }
  return e.handle;
}

void VisionCache::insert(const Hash128& key, int64_t handle, int tiles) {
  FOVEA_CHECK(entries_.count(key) == 0, "vision cache: key ", key.hex(), " inserted twice");
  Entry e;
  e.handle = handle;
  e.tiles = tiles;
  e.pins = 1;
  entries_.emplace(key, e);
  held_tiles_ += tiles;
}

void VisionCache::unpin(const Hash128& key) {
  const auto it = entries_.find(key);
  FOVEA_CHECK(it != entries_.end() && it->second.pins > 0, "vision cache: unpin of unpinned key ", key.hex());
  Entry& e = it->second;
  if (--e.pins == 0) {
    unpinned_lru_.push_back(key);
    e.lru_pos = std::prev(unpinned_lru_.end());
    unpinned_tiles_ += e.tiles;
    trim_to_capacity();
  }
}

void VisionCache::evict(std::unordered_map<Hash128, Entry, Hash128Hasher>::iterator it) {
  unpinned_lru_.erase(it->second.lru_pos);
  held_tiles_ -= it->second.tiles;
  unpinned_tiles_ -= it->second.tiles;
  const int64_t handle = it->second.handle;
  entries_.erase(it);
  release_(handle);
}

void VisionCache::trim_to_capacity() {
  while (held_tiles_ > capacity_tiles_ && !unpinned_lru_.empty()) evict(entries_.find(unpinned_lru_.front()));
}

bool VisionCache::make_room(int tiles, const std::function<int()>& free_tiles) {
  while (free_tiles() < tiles) {
    if (unpinned_lru_.empty()) return false;
    evict(entries_.find(unpinned_lru_.front()));
  }
  return true;
}

void VisionCache::clear_unpinned() {
  while (!unpinned_lru_.empty()) evict(entries_.find(unpinned_lru_.front()));
}

int VisionCache::pins(const Hash128& key) const {
  const auto it = entries_.find(key);
  return it == entries_.end() ? 0 : it->second.pins;
}

}  // namespace fovea
