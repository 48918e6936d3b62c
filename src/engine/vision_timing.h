// `fovea bench --vit-alone N`: the ViT + projector alone, as the engine runs them (ModelRunner::encode_images: the
// tiles' upload as bytes, normalisation on the device, the ViT and the projector in batches of the runner's
// max_step_tiles, the copy into the image pool, a synchronisation), on one batch of N tiles cut from real images,
// timed from the host the way bench/gpu/reference.py times transformers' get_image_features (one warm-up batch,
// then `reps` batches). The end-to-end run's ViT figure is taken while the LLM shares the GPU's power budget, so
// it is slower per tile than a ViT-only measurement; comparing engines needs the same conditions on both sides:
// `hold_seconds` > 0 also times the batch after repeating it that long (the clocks a held load settles at).
#pragma once
#include <string>
#include <vector>

#include "fovea/options.h"

namespace fovea {

struct VisionTimingOptions {
  int tiles = 32;            // tiles per batch (cut from the images in order: the first image's tiles first)
  int reps = 3;              // timed batches after the warm-up
  double hold_seconds = 0;   // > 0: then repeat the batch this long and time its last half
};

struct VisionTiming {
  int tiles = 0;             // tiles per batch
  int max_step_tiles = 0;    // the runner's ViT batch (a larger batch runs in pieces of this many)
  int images = 0;            // images the tiles came from
  int reps = 0;
  double ms_per_tile = 0;    // over the `reps` batches right after the warm-up
  double hold_seconds = 0;   // how long the batch was repeated (0: not held)
  int held_batches = 0;      // batches in the held window's last half
  double held_ms_per_tile = 0;
};

// Builds the runner as Engine(config) does (no scheduler, no KV traffic), preprocesses `images` (encoded bytes)
// with the model's official tiling until `options.tiles` tiles are cut, and times encode_images on them. Throws
// fovea::Error on bad options, an undecodable image, or images with fewer tiles in all than asked.
VisionTiming time_vision(const EngineConfig& config, const std::vector<std::string>& images,
                         const VisionTimingOptions& options);

}  // namespace fovea
