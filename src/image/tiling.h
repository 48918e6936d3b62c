// Tile-grid policies: InternVL's official dynamic tiling, and Fovea's compact policy (see
// docs/components/image-pipeline.md, "Tiling").
#pragma once
#include <utility>
#include <vector>

namespace fovea {

struct TileGrid {
  int cols = 1;
  int rows = 1;
  bool thumbnail = false;
  int num_tiles() const { return cols * rows + (thumbnail ? 1 : 0); }
};

// InternVL's candidate grids: every (cols, rows) with min_tiles ≤ cols·rows ≤ max_tiles, ordered by
// cols·rows, and among equal products in CPython's set order (tabled for max_tiles ≤ 12; beyond, by cols).
// The order matters when min_tiles > 1; the brute-force test checks it against Python's own order.
std::vector<std::pair<int, int>> tile_grid_candidates(int min_tiles, int max_tiles);

// InternVL's dynamic_preprocess grid: the candidate with the aspect ratio closest to width/height (strictly
// closer wins; on an exact tie a later candidate wins when width·height > 0.5·tile²·cols·rows). A thumbnail
// is added when use_thumbnail and the grid has more than one tile.
TileGrid official_tile_grid(int width, int height, int min_tiles, int max_tiles, int tile_size,
                            bool use_thumbnail);

// Fovea's compact grid: at most ceil(width·height / (tile²/2)) tiles (each tile holds at least half a tile of
// source pixels, so small photos are not blown up), the grid that stretches the aspect ratio least
// (|ln(w/h) − ln(cols/rows)|; ties → more tiles), and a thumbnail only when the grid has 3 or more tiles.
TileGrid compact_tile_grid(int width, int height, int min_tiles, int max_tiles, int tile_size,
                           bool use_thumbnail);

}  // namespace fovea
