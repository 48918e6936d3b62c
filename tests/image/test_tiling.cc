// Tile grids: the official rule against a port of InternVL's Python over Python's own candidate order (read
// from data/python_grid_order.txt, written by make_grid_order.py), brute force over every w, h ≤ 4096; the
// compact policy's documented properties.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "image/preprocess.h"
#include "image/tiling.h"

namespace fovea {
namespace {

using Order = std::vector<std::pair<int, int>>;

std::map<std::pair<int, int>, Order> python_orders() {
  std::ifstream in(std::string(FOVEA_SOURCE_DIR) + "/tests/image/data/python_grid_order.txt");
  std::map<std::pair<int, int>, Order> orders;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream s(line);
    int min_num = 0, max_num = 0;
    char colon = 0;
    s >> min_num >> max_num >> colon;
    Order order;
    std::string pair;
    while (s >> pair) order.emplace_back(std::stoi(pair), std::stoi(pair.substr(pair.find(',') + 1)));
    orders[{min_num, max_num}] = order;
  }
  return orders;
}

// find_closest_aspect_ratio, line for line.
std::pair<int, int> python_rule(int width, int height, const Order& ratios, int image_size) {
  const double aspect = double(width) / height;
  double best_diff = INFINITY;
  std::pair<int, int> best{1, 1};
  const double area = double(width) * height;
  for (const auto& r : ratios) {
    const double diff = std::abs(aspect - double(r.first) / r.second);
    if (diff < best_diff) {
      best_diff = diff;
      best = r;
    } else if (diff == best_diff && area > 0.5 * image_size * image_size * r.first * r.second) {
      best = r;
    }
  }
  return best;
}

TEST(Tiling, OfficialMatchesPythonForEveryImageSizeUpTo4096) {
  const auto orders = python_orders();
  ASSERT_EQ(orders.size(), 78u) << "data/python_grid_order.txt missing or incomplete";
  const Order& order = orders.at({1, 12});
  int64_t mismatches = 0;
  for (int w = 1; w <= 4096; ++w)
    for (int h = 1; h <= 4096; ++h) {
      const TileGrid g = official_tile_grid(w, h, 1, 12, 448, true);
      const auto expected = python_rule(w, h, order, 448);
      if (g.cols != expected.first || g.rows != expected.second) {
        if (++mismatches < 5) ADD_FAILURE() << w << "x" << h << ": got " << g.cols << "," << g.rows;
      }
    }
  EXPECT_EQ(mismatches, 0);
}

TEST(Tiling, OfficialMatchesPythonForOtherTileRanges) {
  // Every (min, max) of Python's table, sizes on a coarser lattice (plus the small ones densely).
  for (const auto& [range, order] : python_orders()) {
    for (int w = 1; w <= 4096; w += (w < 64 ? 1 : 37))
      for (int h = 1; h <= 4096; h += (h < 64 ? 1 : 41)) {
        const TileGrid g = official_tile_grid(w, h, range.first, range.second, 448, true);
        const auto expected = python_rule(w, h, order, 448);
        ASSERT_EQ(std::make_pair(g.cols, g.rows), expected) << w << "x" << h << " tiles " << range.first << ".."
                                                            << range.second;
      }
  }
}

TEST(Tiling, OfficialKnownCases) {
  const TileGrid photo = official_tile_grid(800, 600, 1, 12, 448, true);  // 4:3 → 4×3 + thumbnail
  EXPECT_EQ(photo.cols, 4);
  EXPECT_EQ(photo.rows, 3);
  EXPECT_TRUE(photo.thumbnail);
  EXPECT_EQ(photo.num_tiles(), 13);
  const TileGrid square = official_tile_grid(448, 448, 1, 12, 448, true);  // one tile, no thumbnail
  EXPECT_EQ(square.num_tiles(), 1);
  const TileGrid wide = official_tile_grid(1920, 1080, 1, 12, 448, true);  // tie 2:1 vs 4:2 → area decides
  EXPECT_EQ(wide.cols, 4);
  EXPECT_EQ(wide.rows, 2);
  const TileGrid capped = official_tile_grid(800, 600, 1, 4, 448, false);
  EXPECT_LE(capped.cols * capped.rows, 4);
  EXPECT_FALSE(capped.thumbnail);
}

TEST(Tiling, CompactSpendsFewerTokensOnSmallPhotos) {
  const TileGrid small = compact_tile_grid(480, 320, 1, 12, 448, true);  // 3:2, 0.77 tile of pixels
  EXPECT_EQ(small.cols, 2);
  EXPECT_EQ(small.rows, 1);
  EXPECT_FALSE(small.thumbnail);
  EXPECT_EQ(small.num_tiles() * 256, 512);
  EXPECT_EQ(official_tile_grid(480, 360, 1, 12, 448, true).num_tiles(), 13);
  EXPECT_EQ(compact_tile_grid(480, 360, 1, 12, 448, true).num_tiles(), 1);
  // Large photos keep the official grid's detail.
  const TileGrid big = compact_tile_grid(1920, 1080, 1, 12, 448, true);
  EXPECT_EQ(big.cols, 4);
  EXPECT_EQ(big.rows, 2);
  EXPECT_TRUE(big.thumbnail);
}

TEST(Tiling, CompactNeverExceedsItsPixelBudgetOrMaxTiles) {
  for (int w = 16; w <= 4096; w += 61)
    for (int h = 16; h <= 4096; h += 67)
      for (int max_tiles : {1, 2, 6, 12}) {
        const TileGrid g = compact_tile_grid(w, h, 1, max_tiles, 448, true);
        const double budget = std::ceil(double(w) * h / (448.0 * 448.0 / 2));
        ASSERT_LE(g.cols * g.rows, std::max(1.0, std::min(budget, double(max_tiles)))) << w << "x" << h;
        ASSERT_EQ(g.thumbnail, g.cols * g.rows >= 3);
      }
}

TEST(Tiling, ChooseTileGridFollowsOptions) {
  PreprocessOptions options;
  int cols = 0, rows = 0;
  bool thumb = false;
  choose_tile_grid(480, 320, options, &cols, &rows, &thumb);
  EXPECT_EQ(cols * rows + thumb, 7);
  options.compact = true;
  choose_tile_grid(480, 320, options, &cols, &rows, &thumb);
  EXPECT_EQ(cols * rows + thumb, 2);
  options.compact = false;
  options.max_tiles = 1;
  choose_tile_grid(480, 320, options, &cols, &rows, &thumb);
  EXPECT_EQ(cols * rows + thumb, 1);
  EXPECT_THROW(official_tile_grid(0, 10, 1, 12, 448, true), Error);
}

}  // namespace
}  // namespace fovea
