#include "cli/inspect_plan.h"

#include <cctype>
#include <cmath>
#include <cstdio>

#include "engine/engine_plan.h"
#include "model/model_desc.h"

namespace fovea {
namespace {

struct Column {
  const char* label;
  const char* quantization;  // EngineConfig::quantization
  bool w4;                   // the LLM's projections 4-bit (a W4A16 checkpoint or dummy weights)
};

void print_plan(const char* label, const EnginePlan& p) {
  const MemoryPlan& m = p.memory;
  std::printf(
      "  %-6s %10s  weights %9s  KV %9s (%7d blocks)  image pool %8s  "
      "workspace %8s  rounding %7s  reserve %7s  %s\n",
      label, format_gib(m.total()).c_str(), format_gib(m.weights).c_str(), format_gib(m.kv_cache).c_str(), m.kv_blocks,
      format_gib(m.vision_pool).c_str(), format_gib(m.workspace).c_str(), format_gib(m.rounding).c_str(),
      format_gib(m.reserve).c_str(),
      p.fits ? "fits" : "does not fit");
}

}  // namespace

size_t parse_byte_size(const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    FOVEA_FAIL("bad size '", text, "' (e.g. 141GB, 140GiB, 80e9)");
  }
  std::string unit = text.substr(used);
  for (char& c : unit) c = char(std::toupper(static_cast<unsigned char>(c)));
  struct Unit {
    const char* name;
    double bytes;
  };
  // GB means 2^30 as GPU memory is quoted (an H200's "141 GB" is 143,771 MiB); 80e9 for decimal bytes.
  static const Unit kUnits[] = {{"", 1},
                                {"B", 1},
                                {"K", 1024.0},
                                {"KB", 1024.0},
                                {"KIB", 1024.0},
                                {"M", 1 << 20},
                                {"MB", 1 << 20},
                                {"MIB", 1 << 20},
                                {"G", 1 << 30},
                                {"GB", 1 << 30},
                                {"GIB", 1 << 30},
                                {"T", 1099511627776.0},
                                {"TB", 1099511627776.0},
                                {"TIB", 1099511627776.0}};
  for (const Unit& u : kUnits)
    if (unit == u.name) {
      FOVEA_CHECK(value > 0 && std::isfinite(value), "bad size '", text, "'");
      return size_t(value * u.bytes);
    }
  FOVEA_FAIL("bad size '", text, "': unknown unit '", text.substr(used), "' (B, K, M, G, T with or without B / iB)");
}

void print_memory_plan(const std::string& model_dir, const EngineConfig& config, size_t available) {
  const ModelDesc desc = load_model_desc(model_dir);
  const SizingTarget target = cuda_sizing_target();
  std::printf(
      "  plan    one GPU, %s available (--gpu-memory); max_step_tokens "
      "%d, KV blocks %s\n",
      format_gib(available).c_str(), config.max_step_tokens,
      config.kv_blocks > 0 ? std::to_string(config.kv_blocks).c_str() : "auto (up to 40 GB)");
  const int64_t group = desc.quantization.packed() ? desc.quantization.group_size : 128;
  const Column columns[] = {{"bf16", "none", false}, {"fp8", "fp8", false}, {"4-bit", "none", true}};
  for (const Column& c : columns) {
    EngineConfig column = config;
    column.quantization = c.quantization;
    const auto source = make_config_source(desc, ConfigWeights{c.w4, group, 0});
    print_plan(c.label, plan_engine(column, desc, *source, target, available));
  }
  if (config.quantization == "none") return;
  // The quantization asked for, with the refusal the engine would print.
  const QuantizationChoice q = parse_quantization(config.quantization);
  const auto source = make_config_source(desc, ConfigWeights{q.w4 || desc.quantization.packed(), group, 0});
  const EnginePlan p = plan_engine(config, desc, *source, target, available);
  print_plan(config.quantization.c_str(), p);
  if (!p.fits) std::printf("%s\n", p.refusal.c_str());
}

}  // namespace fovea
