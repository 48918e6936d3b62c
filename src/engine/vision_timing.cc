#include "engine/vision_timing.h"

#include <utility>

#include "core/clock.h"
#include "core/error.h"
#include "engine/engine_plan.h"
#include "engine/request_prep.h"
#include "image/preprocess.h"
#include "runtime/runner.h"

namespace fovea {
namespace {

// The first `tiles` tiles of the images, in order, as encode_images takes them (one tensor per image; the last
// one cut to the tiles still wanted). The tiles are what the engine would make: the request's defaults
// (official tiling, the model's max_dynamic_patch) and the engine's choice of bytes or normalised floats.
std::vector<Tensor> cut_tiles(const ModelRunner& runner, const EngineConfig& config,
                              const std::vector<std::string>& images, int tiles) {
  PrepContext context;
  context.desc = &runner.desc();
  if (config.max_image_pixels > 0) context.limits.max_pixels = config.max_image_pixels;
  context.gpu_normalize = config.gpu_normalize && runner.accepts_u8_tiles();
  const PreprocessOptions options = preprocess_options(Request{}, context);
  std::vector<Tensor> batch;
  int have = 0;
  for (size_t i = 0; i < images.size() && have < tiles; ++i) {
    PreprocessedImage image = preprocess_image(images[i], options);
    Tensor t = context.gpu_normalize ? image.tiles_u8 : image.pixel_values;
    const int take = std::min(int(t.dim(0)), tiles - have);
    batch.push_back(take == int(t.dim(0)) ? t : t.rows(0, take));
    have += take;
  }
  FOVEA_CHECK(have == tiles, "vit-alone: ", images.size(), " images give ", have, " tiles, ", tiles, " asked");
  return batch;
}

// One batch through the runner: encode (which synchronises), then give the pool slots back.
void encode_once(ModelRunner& runner, const std::vector<Tensor>& batch) {
  for (int64_t handle : runner.encode_images(batch)) runner.release_image(handle);
}

}  // namespace

VisionTiming time_vision(const EngineConfig& config, const std::vector<std::string>& images,
                         const VisionTimingOptions& options) {
  FOVEA_CHECK(options.tiles >= 1 && options.reps >= 1 && options.hold_seconds >= 0,
              "vit-alone: tiles and reps must be at least 1 and the hold time not negative");
  BuiltRunner built = build_runner(config);
  ModelRunner& runner = *built.runner;
  FOVEA_CHECK(options.tiles <= runner.vision_pool_tiles(), "vit-alone: ", options.tiles,
              " tiles do not fit the image pool of ", runner.vision_pool_tiles(), " (--vision-cache-tiles)");
  const std::vector<Tensor> batch = cut_tiles(runner, config, images, options.tiles);

  VisionTiming timing;
  timing.tiles = options.tiles;
  timing.max_step_tiles = runner.max_step_tiles();
  timing.images = int(batch.size());
  timing.reps = options.reps;
  encode_once(runner, batch);  // warm-up: first-call costs (kernel selection, recordings) are not throughput
  double start = monotonic_seconds();
  for (int r = 0; r < options.reps; ++r) encode_once(runner, batch);
  timing.ms_per_tile = 1e3 * (monotonic_seconds() - start) / (double(options.reps) * options.tiles);
  if (options.hold_seconds > 0) {
    // The batch again and again for hold_seconds (and at least until one batch ends inside the window); the
    // window is the second half, from the end of the first batch past the half mark, once the clocks settled.
    start = monotonic_seconds();
    double window_start = -1, last = 0;
    int in_window = 0;
    do {
      encode_once(runner, batch);
      last = monotonic_seconds() - start;
      if (window_start < 0) {
        if (last >= options.hold_seconds / 2) window_start = last;
      } else {
        ++in_window;
      }
    } while (last < options.hold_seconds || in_window == 0);
    timing.hold_seconds = last;
    timing.held_batches = in_window;
    timing.held_ms_per_tile = 1e3 * (last - window_start) / (double(in_window) * options.tiles);
  }
  return timing;
}

}  // namespace fovea
