#include "engine/block_manager.h"

#include "core/error.h"

namespace fovea {

BlockManager::BlockManager(int num_blocks, int block_size, bool prefix_cache)
    : block_size_(block_size), prefix_cache_(prefix_cache) {
  FOVEA_CHECK(num_blocks > 0 && block_size > 0, "KV pool needs blocks: ", num_blocks, " blocks of ", block_size);
  ref_counts_.assign(size_t(num_blocks), 0);
  cached_free_pos_.resize(size_t(num_blocks));
  has_hash_.assign(size_t(num_blocks), false);
  hash_of_block_.resize(size_t(num_blocks));
  is_pending_.assign(size_t(num_blocks), false);
  pending_hash_of_block_.resize(size_t(num_blocks));
  // Pop order 0, 1, 2, ...: low ids first keeps tests and traces readable.
  for (int b = num_blocks - 1; b >= 0; --b) never_cached_free_.push_back(b);
}

void BlockManager::check_block(int32_t block) const {
  FOVEA_CHECK(block >= 0 && block < num_blocks(), "KV block ", block, " out of range [0, ", num_blocks(), ")");
}

std::vector<int32_t> BlockManager::match_prefix(const std::vector<Hash128>& block_hashes, int max_blocks) {
  std::vector<int32_t> matched;
  if (!prefix_cache_) return matched;
  for (const Hash128& h : block_hashes) {
    if (int(matched.size()) >= max_blocks) break;
    const auto it = block_of_hash_.find(h);
    if (it == block_of_hash_.end()) break;
    const int32_t block = it->second;
    if (ref_counts_[size_t(block)]++ == 0) {
      ++used_;
      cached_free_.erase(cached_free_pos_[size_t(block)]);
    }
    matched.push_back(block);
  }
  return matched;
}

int BlockManager::cached_prefix_blocks(const std::vector<Hash128>& block_hashes, int max_blocks) const {
  if (!prefix_cache_) return 0;
  int n = 0;
  while (n < max_blocks && n < int(block_hashes.size()) && block_of_hash_.count(block_hashes[size_t(n)])) ++n;
  return n;
}

std::vector<int32_t> BlockManager::allocate(int n) {
  FOVEA_CHECK(n <= free_blocks(), "KV pool exhausted: ", n, " blocks wanted, ", free_blocks(), " free of ",
              num_blocks());
  std::vector<int32_t> out;
  out.reserve(size_t(n));
  while (int(out.size()) < n) {
    int32_t block;
    if (!never_cached_free_.empty()) {
      block = never_cached_free_.back();
      never_cached_free_.pop_back();
    } else {
      // Evict the cached block that has been unused longest.
      block = cached_free_.front();
      cached_free_.pop_front();
      forget_hash(block);
    }
    ref_counts_[size_t(block)] = 1;
    ++used_;
    out.push_back(block);
  }
  return out;
}

void BlockManager::release(const std::vector<int32_t>& blocks) {
  for (const int32_t block : blocks) {
    check_block(block);
    int& refs = ref_counts_[size_t(block)];
    FOVEA_CHECK(refs > 0, "KV block ", block, " released more often than taken");
    if (--refs > 0) continue;
    --used_;
    clear_pending(block);  // its holder gave up before computing it: waiters compute it themselves
    if (has_hash_[size_t(block)]) {
      cached_free_.push_back(block);
      cached_free_pos_[size_t(block)] = std::prev(cached_free_.end());
    } else {
      never_cached_free_.push_back(block);
    }
  }
}

void BlockManager::publish(int32_t block, const Hash128& hash) {
  check_block(block);
  FOVEA_CHECK(ref_counts_[size_t(block)] > 0, "publishing KV block ", block, " that nobody holds");
  clear_pending(block);
  if (!prefix_cache_ || has_hash_[size_t(block)]) return;
  if (!block_of_hash_.emplace(hash, block).second) return;  // an identical block is already shared
  has_hash_[size_t(block)] = true;
  hash_of_block_[size_t(block)] = hash;
}

void BlockManager::mark_pending(int32_t block, const Hash128& hash) {
  check_block(block);
  FOVEA_CHECK(ref_counts_[size_t(block)] > 0, "marking KV block ", block, " that nobody holds");
  if (!prefix_cache_ || is_pending_[size_t(block)] || has_hash_[size_t(block)]) return;
  // A second holder computing the same hash (admitted past the wait) stays unmarked: one owner per hash.
  if (!pending_block_of_hash_.emplace(hash, block).second) return;
  is_pending_[size_t(block)] = true;
  pending_hash_of_block_[size_t(block)] = hash;
}

void BlockManager::clear_pending(int32_t block) {
  if (!is_pending_[size_t(block)]) return;
  pending_block_of_hash_.erase(pending_hash_of_block_[size_t(block)]);
  is_pending_[size_t(block)] = false;
}

void BlockManager::forget_hash(int32_t block) {
  if (!has_hash_[size_t(block)]) return;
  block_of_hash_.erase(hash_of_block_[size_t(block)]);
  has_hash_[size_t(block)] = false;
}

}  // namespace fovea
