#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "engine/vision_cache.h"

using namespace fovea;

namespace {
Hash128 key(uint64_t v) { return Hash128{v, v * 7}; }
}  // namespace

TEST(VisionCache, PinnedEntriesSurviveAndUnpinnedAreTrimmedLru) {
  std::vector<int64_t> released;
  VisionCache cache(10, [&](int64_t h) { released.push_back(h); });
  cache.insert(key(1), 101, 6);
  cache.insert(key(2), 102, 6);  // 12 tiles held, over capacity, but both pinned
  EXPECT_TRUE(released.empty());
  cache.unpin(key(1));  // now unpinned and over capacity: released at once
  EXPECT_EQ(released, std::vector<int64_t>{101});
  cache.unpin(key(2));  // 6 tiles fit the capacity: kept
  EXPECT_EQ(cache.entries(), 1);
  EXPECT_EQ(cache.acquire(key(2)), 102);
  EXPECT_EQ(cache.pins(key(2)), 1);
  EXPECT_EQ(cache.acquire(key(1)), -1);
  cache.unpin(key(2));
  EXPECT_THROW(cache.unpin(key(2)), Error);
}

TEST(VisionCache, MakeRoomEvictsOnlyUnpinned) {
  std::vector<int64_t> released;
  int free_tiles = 0;
  VisionCache cache(100, [&](int64_t h) {
    released.push_back(h);
    free_tiles += 4;
  });
  cache.insert(key(1), 1, 4);
  cache.insert(key(2), 2, 4);
  cache.insert(key(3), 3, 4);
  cache.unpin(key(2));
  cache.unpin(key(1));  // LRU order: 2, then 1
  EXPECT_EQ(cache.unpinned_tiles(), 8);
  EXPECT_TRUE(cache.make_room(4, [&] { return free_tiles; }));
  EXPECT_EQ(released, std::vector<int64_t>{2});
  EXPECT_FALSE(cache.make_room(12, [&] { return free_tiles; }));  // key 3 is pinned
  EXPECT_EQ(released, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(cache.entries(), 1);
}

TEST(VisionCache, DestructorReleasesEverything) {
  std::vector<int64_t> released;
  {
    VisionCache cache(100, [&](int64_t h) { released.push_back(h); });
    cache.insert(key(1), 7, 1);
    cache.insert(key(2), 8, 1);
    cache.unpin(key(2));
  }
  EXPECT_EQ(released.size(), 2u);
}
