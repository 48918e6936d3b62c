#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/block_manager.h"

using namespace fovea;

namespace {
Hash128 h(uint64_t v) { return Hash128{v, ~v}; }
}  // namespace

TEST(BlockManager, AllocateReleaseReturnsToZero) {
  BlockManager bm(8, 16, true);
  auto a = bm.allocate(3);
  auto b = bm.allocate(5);
  EXPECT_EQ(bm.used_blocks(), 8);
  EXPECT_EQ(bm.free_blocks(), 0);
  EXPECT_THROW(bm.allocate(1), Error);
  bm.release(a);
  bm.release(b);
  EXPECT_EQ(bm.used_blocks(), 0);
  EXPECT_EQ(bm.free_blocks(), 8);
  EXPECT_THROW(bm.release({a[0]}), Error);  // a double release is a bug, not a silent no-op
}

TEST(BlockManager, PublishedPrefixIsSharedAndRefCounted) {
  BlockManager bm(6, 4, true);
  auto first = bm.allocate(3);
  bm.publish(first[0], h(1));
  bm.publish(first[1], h(2));
  // Chain h(1) -> h(2) -> h(9): the first two match, the third does not.
  auto matched = bm.match_prefix({h(1), h(2), h(9)}, 10);
  ASSERT_EQ(matched.size(), 2u);
  EXPECT_EQ(matched[0], first[0]);
  EXPECT_EQ(matched[1], first[1]);
  EXPECT_EQ(bm.ref_count(first[0]), 2);
  // A chain that diverges at its first block matches nothing even if a later hash is cached.
  EXPECT_TRUE(bm.match_prefix({h(7), h(2)}, 10).empty());
  // max_blocks caps the match.
  auto capped = bm.match_prefix({h(1), h(2)}, 1);
  EXPECT_EQ(capped.size(), 1u);
  bm.release(capped);
  bm.release(first);
  bm.release(matched);
  EXPECT_EQ(bm.used_blocks(), 0);
  EXPECT_EQ(bm.cached_blocks(), 2);  // unused but still findable
  auto again = bm.match_prefix({h(1)}, 10);
  EXPECT_EQ(again.size(), 1u);
  EXPECT_EQ(bm.used_blocks(), 1);
  bm.release(again);
}

TEST(BlockManager, CachedBlocksAreEvictedLastAndLeastRecentlyFreedFirst) {
  BlockManager bm(4, 4, true);
  auto a = bm.allocate(2);
  bm.publish(a[0], h(10));
  bm.publish(a[1], h(11));
  bm.release({a[1]});
  bm.release({a[0]});  // a[1] was freed first: evicted first
  // Two never-cached blocks are handed out before any cached one.
  auto fresh = bm.allocate(2);
  EXPECT_EQ(bm.cached_blocks(), 2);
  auto evicting = bm.allocate(1);
  EXPECT_EQ(evicting[0], a[1]);
  EXPECT_EQ(bm.cached_blocks(), 1);
  EXPECT_TRUE(bm.match_prefix({h(11)}, 1).empty());
  EXPECT_EQ(bm.match_prefix({h(10)}, 1).size(), 1u);
}

TEST(BlockManager, DisabledCacheNeverMatches) {
  BlockManager bm(4, 4, false);
  auto a = bm.allocate(1);
  bm.publish(a[0], h(5));
  EXPECT_TRUE(bm.match_prefix({h(5)}, 4).empty());
  bm.release(a);
  EXPECT_EQ(bm.cached_blocks(), 0);
}

TEST(BlockManager, DuplicateHashKeepsTheFirstBlock) {
  BlockManager bm(4, 4, true);
  auto a = bm.allocate(2);
  bm.publish(a[0], h(3));
  bm.publish(a[1], h(3));  // same content computed twice: the second copy stays private
  bm.release(a);
  auto m = bm.match_prefix({h(3)}, 1);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0], a[0]);
  bm.release(m);
}

TEST(BlockManager, PendingMarkGoesOnPublishOrWhenItsHolderLetsGo) {
  BlockManager bm(6, 4, true);
  auto owner = bm.allocate(2);
  bm.mark_pending(owner[0], h(1));
  bm.mark_pending(owner[1], h(2));
  EXPECT_TRUE(bm.pending(h(1)));
  EXPECT_EQ(bm.cached_prefix_blocks({h(1), h(2)}, 2), 0);
  bm.publish(owner[0], h(1));  // computed: findable, no longer pending
  EXPECT_FALSE(bm.pending(h(1)));
  EXPECT_EQ(bm.cached_prefix_blocks({h(1), h(2)}, 2), 1);
  auto second = bm.allocate(1);
  bm.mark_pending(second[0], h(2));  // one owner per hash: the first mark stays
  bm.release(second);
  EXPECT_TRUE(bm.pending(h(2)));
  bm.release(owner);  // the owner gave up before computing block 2: nobody waits for it any more
  EXPECT_FALSE(bm.pending(h(2)));
  EXPECT_EQ(bm.pending_blocks(), 0);
  EXPECT_EQ(bm.used_blocks(), 0);
  EXPECT_EQ(bm.cached_prefix_blocks({h(1), h(2)}, 2), 1);
}
