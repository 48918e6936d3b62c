// fovea preprocess IMAGE [--max-tiles N] [--policy official|compact] [--exif] --out FILE.safetensors
// Writes the model input exactly as the reference computes it: tiles_u8 [T,448,448,3] U8 (RGB before
// normalisation), pixel_values [T,3,448,448] F32, metadata grid = "COLS,ROWS", thumbnail = "0|1".
#include <cstdio>

#include "cli/command.h"
#include "core/safetensors_writer.h"
#include "core/thread_pool.h"
#include "image/preprocess.h"

namespace fovea {
namespace {

PreprocessOptions options_from(const Args& args) {
  PreprocessOptions options;
  options.max_tiles = args.get_int("--max-tiles", options.max_tiles);
  FOVEA_CHECK(options.max_tiles >= 1 && options.max_tiles <= 64, "--max-tiles must be 1..64, got ",
              options.max_tiles);
  const std::string policy = args.get("--policy", "official");
  FOVEA_CHECK(policy == "official" || policy == "compact", "--policy must be official or compact, got '", policy,
              "'");
  options.compact = policy == "compact";
  options.exif_transpose = args.has("--exif");
  return options;
}

int run_preprocess(const std::vector<std::string>& argv) {
  const Args args(argv);
  args.allow_only({"--max-tiles", "--policy", "--exif", "--out"});
  FOVEA_CHECK(args.positional().size() == 1,
              "usage: fovea preprocess IMAGE [--max-tiles N] [--policy official|compact] [--exif] --out FILE");
  const std::string out_path = args.get("--out");
  FOVEA_CHECK(!out_path.empty(), "--out FILE.safetensors is required");
  PreprocessOptions options = options_from(args);
  options.pool = &ThreadPool::global();  // one image: spread its resize over the cores (same bytes)
  const std::string& image_path = args.positional()[0];
  const RgbImage image = decode_image_file(image_path, options.limits, options.exif_transpose);
  const PreprocessedImage result = preprocess_rgb(image, options);
  write_safetensors(out_path, {{"tiles_u8", result.tiles_u8}, {"pixel_values", result.pixel_values}},
                    {{"grid", std::to_string(result.cols) + "," + std::to_string(result.rows)},
                     {"thumbnail", result.thumbnail ? "1" : "0"}});
  std::printf("%s: %dx%d -> grid %dx%d%s, %d tiles\n", image_path.c_str(), image.width, image.height, result.cols,
              result.rows, result.thumbnail ? " + thumbnail" : "", result.num_tiles());
  return 0;
}

const CommandRegistration registration{"preprocess", "image -> model input tiles (safetensors), Pillow-exact",
                                       run_preprocess};

}  // namespace
}  // namespace fovea
