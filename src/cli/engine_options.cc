#include "cli/engine_options.h"

#include <algorithm>
#include <cstdio>

namespace fovea {

const std::vector<EngineOption>& engine_options() {
  using C = EngineConfig;
  static const std::vector<EngineOption> options = {
      {"--model", "model_dir", &C::model_dir, "DIR", "the checkpoint directory (required)"},
      {"--backend", "backend", &C::backend, "cpu|cuda|auto", "where the model runs (auto: CUDA when a GPU is found)",
       true, 0, true},
      {"--gpus", "gpus", &C::gpus, "all|0,1,3", "one engine per GPU behind one data-parallel dispatcher"},
      {"--replicas", "replicas", &C::replicas, "N", "CPU backend: N engines behind the same dispatcher", true, 1},
      {"--engine-failure-retries", "engine_failure_retries", &C::engine_failure_retries, "N",
       "with several engines: a request whose engine failed runs again on another one this many times", true, 0},
      {"--quantization", "quantization", &C::quantization,
       "none|fp8|fp8-tensor|fp8-channel|fp8-block|fp8-channel-act128|fp8-all|w4a16",
       "W8A8 E4M3 for the LLM's projections; scales per tensor, per channel x per token, 128x128 x 1x128 blocks, "
       "or per channel x 1x128; fp8 = fp8-channel; fp8-all: the ViT's qkv and fc1 too; w4a16: the LLM's projections "
       "4-bit (a 4-bit checkpoint kept packed, or 4-bit dummy weights)"},
      {"--w4", "w4", &C::w4, "auto|packed|dequantize",
       "4-bit AWQ/GPTQ checkpoints: keep the LLM's linears 4-bit on the device (W4A16) or load them as bf16; "
       "auto: packed on CUDA"},
      {"--load-format", "load_format", &C::load_format, "auto|dummy",
       "dummy: random weights of config.json's shapes made on the device, no safetensors read (benchmarking a "
       "model whose checkpoint is not at hand)",
       true, 0, true},
      {"--batch-invariant", "batch_invariant", &C::batch_invariant, "",
       "a request's outputs independent of its batch-mates (CUDA: slower kernels)"},
      {"--kv-blocks", "kv_blocks", &C::kv_blocks, "N", "KV cache blocks (0: sized from the device's memory)"},
      {"--block-size", "block_size", &C::block_size, "8|16|32|64",
       "KV cache positions per block (default 16): larger blocks give prefill attention fewer, larger loads; shared "
       "prefixes are reused in whole blocks", true, 8},
      {"--max-step-tokens", "max_step_tokens", &C::max_step_tokens, "N",
       "token budget of one engine step, image tokens included (the CPU backend caps it at 1024)", true, 1},
      {"--max-batch-seqs", "max_batch_seqs", &C::max_batch_seqs, "N", "sequences in one step at most", true, 1},
      {"--max-queue", "max_queue", &C::max_queue, "N",
       "requests waiting at most; beyond it submit is refused (serve: 429)", true, 1},
      {"--preprocess-threads", "preprocess_threads", &C::preprocess_threads, "N",
       "image decoding and tiling threads (0: every core)"},
      {"--vision-cache-tiles", "vision_cache_tiles", &C::vision_cache_tiles, "N",
       "ViT outputs kept for repeated images, in tiles (0: 256 on a GPU, 32 on the CPU)"},
      {"--max-image-pixels", "max_image_pixels", &C::max_image_pixels, "N",
       "largest decoded image (0: 89478485, Pillow's limit)"},
      {"--no-prefix-cache", "prefix_cache", &C::prefix_cache, "",
       "compute every prompt's KV (no reuse of shared prefixes)", false},
      {"--no-cuda-graphs", "cuda_graphs", &C::cuda_graphs, "",
       "launch decode steps op by op instead of replaying recordings", false},
      {"--vit-graphs", "vit_graphs", &C::vit_graphs, "",
       "replay ViT batches as recordings per tile-count bucket too (CUDA)"},
      {"--cpu-normalize", "gpu_normalize", &C::gpu_normalize, "",
       "tiles leave the host as normalised float32, not as bytes normalised on the device", false},
  };
  return options;
}

namespace {

const char* kTilingUsage =
    "  --tiling official|compact   tiling of requests that do not say (--policy official|compact: the same)\n"
    "  --max-tiles N               tile limit of requests that do not say (0: the model's max_dynamic_patch)\n";

// How fovea.Engine spells the option when that is not the flag with underscores (the --no- switches, and
// --cpu-normalize), for the usage: "" otherwise.
std::string python_spelling(const EngineOption& o) {
  std::string derived = o.flag + 2;
  for (char& c : derived)
    if (c == '-') c = '_';
  if (!o.switch_sets) return str(o.field, "=False");
  return derived == o.field || derived == "model" ? "" : o.field;
}

// Words of `text` on lines of at most kWidth columns, each after an indent of kIndent.
constexpr size_t kIndent = 30, kWidth = 116;
std::string wrap(const std::string& text) {
  std::string out, line;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find(' ', start), text.size());
    const std::string word = text.substr(start, end - start);
    if (!line.empty() && kIndent + line.size() + 1 + word.size() > kWidth) {
      out += line + "\n" + std::string(kIndent, ' ');
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    start = end + 1;
  }
  return out + line + "\n";
}

bool is_choice(const std::string& value, const std::string& choices) {
  size_t start = 0;
  while (start <= choices.size()) {
    const size_t end = std::min(choices.find('|', start), choices.size());
    if (choices.compare(start, end - start, value) == 0 && end - start == value.size()) return true;
    start = end + 1;
  }
  return false;
}

}  // namespace

std::vector<std::string> engine_option_flags() {
  std::vector<std::string> flags = {"--tiling", "--policy", "--max-tiles"};
  for (const EngineOption& o : engine_options()) flags.push_back(o.flag);
  return flags;
}

EngineConfig parse_engine_options(const Args& args) {
  EngineConfig config;
  for (const EngineOption& o : engine_options()) {
    if (!args.has(o.flag)) continue;
    if (auto* text = std::get_if<std::string EngineConfig::*>(&o.member)) {
      const std::string value = args.get(o.flag);
      if (o.check_choices && !is_choice(value, o.value))
        throw UsageError(str(o.flag, " must be one of ", o.value, ", got '", value, "'"));
      config.*(*text) = value;
    } else if (auto* number = std::get_if<int EngineConfig::*>(&o.member)) {
      const int value = args.get_int(o.flag, 0);
      if (value < o.min) throw UsageError(str(o.flag, " must be at least ", o.min));
      config.*(*number) = value;
    } else {
      config.*std::get<bool EngineConfig::*>(o.member) = o.switch_sets;
    }
  }
  if (config.model_dir.empty()) throw UsageError("--model DIR is required");
  return config;
}

TilingOptions parse_tiling_options(const Args& args) {
  TilingOptions t;
  const std::string tiling = args.get("--tiling", args.get("--policy", "official"));
  if (tiling != "official" && tiling != "compact") throw UsageError("--tiling must be official or compact");
  t.tiling = tiling == "compact" ? TilingPolicy::Compact : TilingPolicy::Official;
  t.max_tiles = args.get_int("--max-tiles", 0);
  if (t.max_tiles < 0) throw UsageError("--max-tiles must be 0 (the model's limit) or more");
  return t;
}

std::string engine_options_usage() {
  const EngineConfig defaults;
  std::string out = "engine options (Python: the fovea.Engine keyword of the same name, or the one in brackets):\n";
  for (const EngineOption& o : engine_options()) {
    std::string left = std::string("  ") + o.flag + (*o.value ? std::string(" ") + o.value : "");
    std::string help = o.help;
    if (auto* number = std::get_if<int EngineConfig::*>(&o.member); number && defaults.*(*number) != 0)
      help += str(" (default ", defaults.*(*number), ")");
    if (const std::string python = python_spelling(o); !python.empty()) help += " [" + python + "]";
    if (left.size() + 2 > kIndent) {
      out += left + "\n";
      left.clear();
    }
    left.resize(kIndent, ' ');
    out += left + wrap(help);
  }
  return out + kTilingUsage;
}

}  // namespace fovea
