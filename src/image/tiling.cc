#include "image/tiling.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "core/error.h"

namespace fovea {

extern const char* const kPythonGridOrder[];
extern const int kPythonGridOrderLines;

namespace {

using Candidates = std::vector<std::pair<int, int>>;

// Python's order for every (min, max) up to 12, parsed once.
const std::map<std::pair<int, int>, Candidates>& python_orders() {
  static const auto orders = [] {
    std::map<std::pair<int, int>, Candidates> parsed;
    for (int n = 0; n < kPythonGridOrderLines; ++n) {
      std::istringstream line(kPythonGridOrder[n]);
      int min_tiles = 0, max_tiles = 0;
      char colon = 0, comma = 0;
      line >> min_tiles >> max_tiles >> colon;
      Candidates& order = parsed[{min_tiles, max_tiles}];
      int i = 0, j = 0;
      while (line >> i >> comma >> j) order.emplace_back(i, j);
    }
    return parsed;
  }();
  return orders;
}

Candidates sorted_candidates(int min_tiles, int max_tiles) {
  Candidates candidates;
  for (int i = 1; i <= max_tiles; ++i)
    for (int j = 1; j <= max_tiles; ++j)
      if (i * j >= min_tiles && i * j <= max_tiles) candidates.emplace_back(i, j);
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const auto& a, const auto& b) { return a.first * a.second < b.first * b.second; });
  return candidates;
}

}  // namespace

std::vector<std::pair<int, int>> tile_grid_candidates(int min_tiles, int max_tiles) {
  FOVEA_CHECK(min_tiles >= 1 && max_tiles >= min_tiles && max_tiles <= 64, "tiling: bad tile range ", min_tiles,
              "..", max_tiles);
  const auto& orders = python_orders();
  const auto it = orders.find({min_tiles, max_tiles});
  return it != orders.end() ? it->second : sorted_candidates(min_tiles, max_tiles);
}

TileGrid official_tile_grid(int width, int height, int min_tiles, int max_tiles, int tile_size,
                            bool use_thumbnail) {
  FOVEA_CHECK(width > 0 && height > 0, "tiling: bad image size ", width, "x", height);
  const double aspect = double(width) / double(height);
  const double area = double(width) * double(height);
  double best_diff = INFINITY;
  std::pair<int, int> best{1, 1};
  FOVEA_CHECK(min_tiles >= 1 && max_tiles >= min_tiles && max_tiles <= 64, "tiling: bad tile range ", min_tiles,
              "..", max_tiles);
  const auto& orders = python_orders();
  const auto cached = orders.find({min_tiles, max_tiles});
  const Candidates computed = cached == orders.end() ? sorted_candidates(min_tiles, max_tiles) : Candidates{};
  for (const auto& [i, j] : cached != orders.end() ? cached->second : computed) {
    const double diff = std::abs(aspect - double(i) / double(j));
    if (diff < best_diff) {
      best_diff = diff;
      best = {i, j};
    } else if (diff == best_diff && area > 0.5 * tile_size * tile_size * i * j) {
      best = {i, j};
    }
  }
  TileGrid grid{best.first, best.second, false};
  grid.thumbnail = use_thumbnail && grid.cols * grid.rows != 1;
  return grid;
}

TileGrid compact_tile_grid(int width, int height, int min_tiles, int max_tiles, int tile_size,
                           bool use_thumbnail) {
  FOVEA_CHECK(width > 0 && height > 0, "tiling: bad image size ", width, "x", height);
  const double half_tile = 0.5 * double(tile_size) * double(tile_size);
  const int64_t by_pixels = int64_t(std::ceil(double(width) * double(height) / half_tile));
  const int budget = int(std::clamp<int64_t>(by_pixels, min_tiles, max_tiles));
  const double log_aspect = std::log(double(width) / double(height));
  double best_stretch = INFINITY;
  std::pair<int, int> best{1, 1};
  for (const auto& [i, j] : tile_grid_candidates(min_tiles, budget)) {
    const double stretch = std::abs(log_aspect - std::log(double(i) / double(j)));
    // Candidates come in increasing tile count, so `<=` lets a larger grid win a tie.
    if (stretch <= best_stretch + 1e-12) {
      best_stretch = std::min(best_stretch, stretch);
      best = {i, j};
    }
  }
  TileGrid grid{best.first, best.second, false};
  grid.thumbnail = use_thumbnail && grid.cols * grid.rows >= 3;
  return grid;
}

}  // namespace fovea
