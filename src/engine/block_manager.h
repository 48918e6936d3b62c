// The paged KV block manager (host side only: it hands out block ids; the runner owns the memory they index).
// Blocks are reference counted so that sequences can share a cached prefix. A full block whose KV has been
// computed can be published under its chain hash; once its last user lets go it stays findable (and
// evictable, least recently freed first) until the space is needed again. A fresh block that its holder is
// about to compute can be marked *pending* under its hash: later requests with that prefix then wait for it
// (the scheduler defers them) instead of computing it a second time; the mark goes when the block is
// published or its holder lets go of it (failed, cancelled), so a waiter is never stranded.
#pragma once
#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

#include "core/hash.h"

namespace fovea {

class BlockManager {
 public:
  BlockManager(int num_blocks, int block_size, bool prefix_cache);

  int num_blocks() const { return int(ref_counts_.size()); }
  int block_size() const { return block_size_; }
  int used_blocks() const { return used_; }                         // blocks with a user
  int free_blocks() const { return num_blocks() - used_; }          // never-used + cached-but-unused
  int cached_blocks() const { return int(block_of_hash_.size()); }  // published blocks, used or not
  bool prefix_cache() const { return prefix_cache_; }

  // The longest run of leading hashes whose blocks are cached, at most max_blocks; takes a reference on each.
  std::vector<int32_t> match_prefix(const std::vector<Hash128>& block_hashes, int max_blocks);
  // Takes n fresh blocks (evicting cached unused ones when needed); throws when fewer than n are free.
  std::vector<int32_t> allocate(int n);
  // Drops one reference on each block.
  void release(const std::vector<int32_t>& blocks);
  // Block `block` is full and its KV computed: later sequences with the same chain hash may share it. A no-op
  // when prefix caching is off or another block already holds that hash.
  void publish(int32_t block, const Hash128& hash);
  int ref_count(int32_t block) const { return ref_counts_.at(size_t(block)); }
  // How many leading hashes (at most max_blocks) match published blocks; takes no reference.
  int cached_prefix_blocks(const std::vector<Hash128>& block_hashes, int max_blocks) const;
  // Block `block` (held, not yet computed) will be published under `hash` once its KV is written.
  void mark_pending(int32_t block, const Hash128& hash);
  // Whether some held block is being computed under this hash (published ones are not pending).
  bool pending(const Hash128& hash) const { return pending_block_of_hash_.count(hash) != 0; }
  int pending_blocks() const { return int(pending_block_of_hash_.size()); }

 private:
  void check_block(int32_t block) const;
  void forget_hash(int32_t block);
  void clear_pending(int32_t block);

  int block_size_;
  bool prefix_cache_;
  int used_ = 0;
  std::vector<int> ref_counts_;
  std::vector<int32_t> never_cached_free_;                     // unused blocks holding nothing worth keeping (a stack)
  std::list<int32_t> cached_free_;                             // unused published blocks, least recently freed first
  std::vector<std::list<int32_t>::iterator> cached_free_pos_;  // per block, valid while it is in cached_free_
  std::vector<bool> has_hash_;
  std::vector<Hash128> hash_of_block_;
  std::unordered_map<Hash128, int32_t, Hash128Hasher> block_of_hash_;
  std::vector<bool> is_pending_;
  std::vector<Hash128> pending_hash_of_block_;
  std::unordered_map<Hash128, int32_t, Hash128Hasher> pending_block_of_hash_;
};

}  // namespace fovea
