// fovea quantize --model IN --out OUT --method awq|gptq|rtn|fp8: writes a quantized copy of a bf16 / f32 InternVL
// checkpoint (src/quantize/quantize_checkpoint.h says which layouts and what is quantized).
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "cli/command.h"
#include "core/error.h"
#include "quantize/quantize_checkpoint.h"

namespace fovea {
namespace {

const char* kUsage =
    "usage: fovea quantize --model IN --out OUT --method awq|gptq|rtn|fp8 [--group 128] [--act-order]\n"
    "                      [--calib TASKS.jsonl|IMAGE_DIR] [--samples 32] [--prompt TEXT] [--max-tiles N]\n"
    "                      [--calib-rows 8192] [--include-vision]\n"
    "  awq, gptq: 4-bit from calibration activations (the model runs --calib on the CPU backend)\n"
    "  rtn: 4-bit round-to-nearest (GPTQ layout, no calibration); fp8: E4M3 per-channel (compressed-tensors)\n"
    "  --calib-rows N: input rows kept per linear, sampled evenly from every calibration task's rows (bf16;\n"
    "                  InternVL2-8B needs ~1.7 MB per row over its 32 layers)\n"
    "  --group N: 4-bit group size (-1: one group per row); --act-order: GPTQ in descending activation order\n"
    "  --include-vision: the ViT's and projector's linears too (round-to-nearest / fp8)\n";

// One line redrawn on a terminal; otherwise a line per step.
void show_progress(int done, int total, const std::string& what) {
  static const bool terminal = ::isatty(STDERR_FILENO) == 1;
  constexpr int kWidth = 30;
  const int filled = total > 0 ? done * kWidth / total : 0;
  std::fprintf(stderr, "%squantize [%s%s] %d/%d %s%s", terminal ? "\r" : "", std::string(size_t(filled), '#').c_str(),
               std::string(size_t(kWidth - filled), '.').c_str(), done, total, what.c_str(),
               terminal ? "\033[K" : "\n");
  if (terminal && done == total && what == "done") std::fputc('\n', stderr);
  std::fflush(stderr);
}

int quantize_main(const std::vector<std::string>& raw) {
  const Args args(raw);
  if (args.has("--help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  QuantizeOptions opt;
  try {
    args.allow_only({"--model", "--out", "--method", "--group", "--act-order", "--calib", "--samples", "--prompt",
                     "--calib-rows", "--include-vision", "--max-tiles", "--help"});
    FOVEA_CHECK(args.positional().empty(), "unexpected argument ", args.positional().empty() ? "" : args.positional()[0]);
    opt.model_dir = args.get("--model");
    opt.out_dir = args.get("--out");
    FOVEA_CHECK(!opt.model_dir.empty() && !opt.out_dir.empty() && args.has("--method"),
                "--model, --out and --method are required");
    opt.method = parse_quantize_method(args.get("--method"));
    opt.group = args.get_int("--group", 128);
    opt.act_order = args.has("--act-order");
    FOVEA_CHECK(!opt.act_order || opt.method == QuantizeMethod::Gptq, "--act-order is a GPTQ option");
    opt.include_vision = args.has("--include-vision");
    opt.calibration.source = args.get("--calib");
    opt.calibration.samples = args.get_int("--samples", opt.calibration.samples);
    FOVEA_CHECK(opt.calibration.samples >= 1, "--samples must be at least 1");
    opt.calibration.max_rows = args.get_int("--calib-rows", int(opt.calibration.max_rows));
    FOVEA_CHECK(opt.calibration.max_rows >= 1, "--calib-rows must be at least 1");
    opt.calibration.max_tiles = args.get_int("--max-tiles", 0);
    FOVEA_CHECK(opt.calibration.max_tiles >= 0, "--max-tiles must be positive");
    if (args.has("--prompt")) opt.calibration.prompt = args.get("--prompt");
    const bool calibrated = opt.method == QuantizeMethod::Awq || opt.method == QuantizeMethod::Gptq;
    FOVEA_CHECK(!calibrated || !opt.calibration.source.empty(), "--method ", args.get("--method"),
                " needs calibration data: --calib TASKS.jsonl or an image folder");
  } catch (const Error& e) {
    std::fprintf(stderr, "fovea quantize: %s\n%s", e.what(), kUsage);
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  const QuantizeSummary s = quantize_checkpoint(opt, show_progress);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s: %d linears quantized (%s) in %.1f s", opt.out_dir.c_str(), s.linears, s.config_source.c_str(),
              seconds);
  if (s.calibration_rows_seen > 0)
    std::printf(" (calibration %.1f s: %lld of %lld rows per linear, sampled from %d tasks, %.2f GiB)",
                s.seconds_calibration, static_cast<long long>(s.calibration_rows_kept),
                static_cast<long long>(s.calibration_rows_seen), s.calibration_tasks,
                double(s.calibration_bytes) / double(1ull << 30));
  std::printf("\n");
  return 0;
}

const CommandRegistration registration{"quantize", "write an AWQ / GPTQ / FP8 copy of a bf16 checkpoint",
                                       quantize_main};

}  // namespace
}  // namespace fovea
