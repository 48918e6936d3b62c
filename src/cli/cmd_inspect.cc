// fovea inspect IMAGE [--max-tiles N] [--exif] [--out FILE.png]: prints the grid, tiles and image tokens each
// tiling policy spends on the image, and draws both grids over it (official in red, compact in blue dashes).
// fovea inspect --model DIR: prints what the loader reads from the checkpoint's config (sizes, tiles,
// quantization); with an IMAGE too, both. --plan adds the device memory an engine would plan for it on one GPU
// (cli/inspect_plan.h).
#include <cctype>
#include <cstdio>
#include <map>
#include <filesystem>

#include "cli/command.h"
#include "cli/inspect_plan.h"
#include "image/encode.h"
#include "image/preprocess.h"
#include "model/model_desc.h"
#include "model/safetensors.h"

namespace fovea {
namespace {

constexpr int kTokensPerTile = 256;  // InternViT 448px tile → 16×16 tokens after pixel shuffle

struct PolicyGrid {
  const char* name;
  int cols = 1, rows = 1;
  bool thumbnail = false;
  int tiles() const { return cols * rows + (thumbnail ? 1 : 0); }
};

void set_pixel(RgbImage& image, int x, int y, const uint8_t rgb[3]) {
  if (x < 0 || y < 0 || x >= image.width || y >= image.height) return;
  uint8_t* p = &image.pixels[(size_t(y) * image.width + x) * 3];
  p[0] = rgb[0], p[1] = rgb[1], p[2] = rgb[2];
}

// Cell borders of a cols × rows grid stretched over the whole image (the tiles cover it after the resize).
void draw_grid(RgbImage& image, const PolicyGrid& grid, const uint8_t rgb[3], bool dashed, int offset) {
  const int thickness = std::max(1, std::min(image.width, image.height) / 200);
  auto on = [&](int t) { return !dashed || (t / (4 * thickness)) % 2 == 0; };
  for (int c = 0; c <= grid.cols; ++c) {
    const int x0 = int(int64_t(c) * (image.width - 1) / grid.cols) + offset;
    for (int y = 0; y < image.height; ++y)
      for (int k = 0; k < thickness; ++k)
        if (on(y)) set_pixel(image, x0 + k - thickness / 2, y, rgb);
  }
  for (int r = 0; r <= grid.rows; ++r) {
    const int y0 = int(int64_t(r) * (image.height - 1) / grid.rows) + offset;
    for (int x = 0; x < image.width; ++x)
      for (int k = 0; k < thickness; ++k)
        if (on(x)) set_pixel(image, x, y0 + k - thickness / 2, rgb);
  }
}

const char* llm_arch_name(LlmArch arch) {
  switch (arch) {
    case LlmArch::InternLM2:
      return "InternLM2";
    case LlmArch::Llama:
      return "Llama";
    case LlmArch::Qwen2:
      return "Qwen2";
    case LlmArch::Qwen3:
      return "Qwen3";
  }
  return "?";
}

// Which linears the checkpoint stores quantized (X.qweight, or an E4M3 X.weight with X.weight_scale), with
// layer indices folded: "language_model.model.layers.*.attention.wqkv x2".
void print_quantized_linears(const std::string& dir, const CheckpointQuantization& q) {
  const SafetensorsSet set(dir);
  std::map<std::string, int> patterns;
  int total = 0, dense = 0;
  for (const std::string& name : set.names()) {
    std::string prefix;
    if (name.size() > 8 && name.compare(name.size() - 8, 8, ".qweight") == 0) prefix = name.substr(0, name.size() - 8);
    if (q.fp8_weights && name.size() > 13 && name.compare(name.size() - 13, 13, ".weight_scale") == 0)
      prefix = name.substr(0, name.size() - 13);
    if (prefix.empty()) {
      if (name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0 && set.get(name).rank() == 2) ++dense;
      continue;
    }
    std::string pattern;
    for (size_t i = 0; i < prefix.size(); ++i) {
      if (std::isdigit(static_cast<unsigned char>(prefix[i])) && i > 0 && prefix[i - 1] == '.') {
        while (i < prefix.size() && std::isdigit(static_cast<unsigned char>(prefix[i]))) ++i;
        pattern += '*';
        --i;
        continue;
      }
      pattern += prefix[i];
    }
    ++patterns[pattern];
    ++total;
  }
  std::printf("  quantized linears %d (matrices left dense: %d)\n", total, dense);
  for (const auto& [pattern, count] : patterns) std::printf("          %s x%d\n", pattern.c_str(), count);
}

void print_model(const std::string& dir) {
  const ModelDesc d = load_model_desc(dir);
  const VisionConfig& v = d.vision;
  const LlmConfig& l = d.llm;
  std::printf("%s: %s format\n", dir.c_str(),
              d.format == CheckpointFormat::InternVLChat ? "internvl_chat" : "internvl");
  std::printf("  vision  %d px tiles, patch %d, hidden %d, %d layers, %d heads, mlp %d\n", v.image_size, v.patch_size,
              v.hidden, v.layers, v.heads, v.mlp);
  std::printf("  llm     %s, hidden %d, %d layers, %d heads (%d kv, dim %d), ffn %d, vocab %d\n", llm_arch_name(l.arch),
              l.hidden, l.layers, l.heads, l.kv_heads, l.head_dim, l.ffn, l.vocab);
  std::printf("  tiles   %d..%d%s\n", d.min_dynamic_tiles, d.max_dynamic_tiles, d.use_thumbnail ? " + thumbnail" : "");
  const CheckpointQuantization& q = d.quantization;
  if (q.packed()) {
    std::printf("  weights %s (%s)\n", q.describe().c_str(), q.source.c_str());
    std::printf("  W4A16   on CUDA the LLM's packed linears stay 4-bit on the device (linear_w4); the CPU backend\n"
                "          and --w4 dequantize load them as bf16\n");
    print_quantized_linears(dir, q);
  } else if (q.fp8_weights) {
    std::printf("  weights %s (%s); loaded as bf16\n", q.describe().c_str(), q.source.c_str());
    print_quantized_linears(dir, q);
  } else {
    std::printf("  weights as stored (no quantization_config)\n");
  }
}

int run_inspect(const std::vector<std::string>& argv) {
  const Args args(argv);
  args.allow_only({"--max-tiles", "--exif", "--out", "--model", "--plan", "--quantization", "--gpu-memory",
                   "--kv-blocks"});
  const std::string model = args.get("--model");
  std::vector<std::string> positional = args.positional();
  if (!args.get("--plan").empty()) positional.push_back(args.get("--plan"));  // "--plan IMAGE": a flag, then the image
  FOVEA_CHECK(positional.size() == 1 || (positional.empty() && !model.empty()),
              "usage: fovea inspect IMAGE [--max-tiles N] [--exif] [--out FILE.png] | fovea inspect --model DIR "
              "[--plan [--quantization Q] [--gpu-memory SIZE] [--kv-blocks N]]");
  if (!model.empty()) print_model(model);
  if (args.has("--plan")) {
    FOVEA_CHECK(!model.empty(), "--plan needs --model DIR");
    EngineConfig config;
    config.model_dir = model;
    config.quantization = args.get("--quantization", "none");
    config.kv_blocks = args.get_int("--kv-blocks", 0);
    const std::string memory = args.get("--gpu-memory");
    print_memory_plan(model, config, memory.empty() ? kDefaultPlanMemory : parse_byte_size(memory));
  }
  if (positional.empty()) return 0;
  const std::string path = positional[0];
  PreprocessOptions options;
  options.max_tiles = args.get_int("--max-tiles", options.max_tiles);
  options.exif_transpose = args.has("--exif");
  RgbImage image = decode_image_file(path, options.limits, options.exif_transpose);

  PolicyGrid grids[2] = {{"official"}, {"compact"}};
  for (int i = 0; i < 2; ++i) {
    options.compact = i == 1;
    choose_tile_grid(image.width, image.height, options, &grids[i].cols, &grids[i].rows, &grids[i].thumbnail);
  }
  std::printf("%s: %dx%d, max tiles %d\n", path.c_str(), image.width, image.height, options.max_tiles);
  for (const PolicyGrid& g : grids)
    std::printf("  %-8s grid %dx%d%s = %d tiles, %d image tokens\n", g.name, g.cols, g.rows,
                g.thumbnail ? " + thumbnail" : "", g.tiles(), g.tiles() * kTokensPerTile);

  const uint8_t red[3] = {230, 30, 30}, blue[3] = {40, 90, 255};
  draw_grid(image, grids[0], red, false, 0);
  draw_grid(image, grids[1], blue, true, 0);
  std::string out = args.get("--out");
  if (out.empty()) out = std::filesystem::path(path).stem().string() + "_grid.png";
  write_png(out, image);
  std::printf("  grids drawn into %s (official: red, compact: blue dashes)\n", out.c_str());
  return 0;
}

const CommandRegistration registration{"inspect", "show the tile grid and tokens each tiling policy spends on an image",
                                       run_inspect};

}  // namespace
}  // namespace fovea
