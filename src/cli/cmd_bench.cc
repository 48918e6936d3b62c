// fovea bench: runs a workload through the engine and reports QPM, tokens/s, time per stage (EngineStats), and
// MFU against a GEMM peak measured in the same process; writes JSON and an SVG plot.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <utility>

#include "backend/backend.h"
#include "cli/command.h"
#include "cli/engine_options.h"
#include "core/clock.h"
#include "core/error.h"
#include "engine/stats_fields.h"
#include "engine/vision_timing.h"
#include "model/model_desc.h"
#include "jobs/bench_report.h"
#include "jobs/bench_workload.h"
#include "jobs/request_pump.h"
#include "fovea/engine.h"
#include "model/chat_template.h"

namespace fovea {
namespace {

const char* kDefaultQuestion =
    "图中有3张以上的床，或者是有双层床，请直接给出是或者否，然后给出详细的解释。注意1张双层床有2张床";

// --questions K asks each image the first K of these (the first is --prompt): distinct questions of the
// listing-photo job, each answered by its first token.
const char* const kListingQuestions[] = {
    nullptr,  // --prompt
    "图中有沙发吗？请直接给出是或者否。",
    "这张照片是在室内拍摄的吗？请直接给出是或者否。",
    "图中有窗户吗？请直接给出是或者否。",
    "图中有书桌或者写字台吗？请直接给出是或者否。",
    "图中有电视机吗？请直接给出是或者否。",
    "图中能看到厨房或者灶台吗？请直接给出是或者否。",
    "图中有卫生间设施（马桶、淋浴或者浴缸）吗？请直接给出是或者否。",
    "图中有空调吗？请直接给出是或者否。",
    "图中有衣柜吗？请直接给出是或者否。",
    "图中有人吗？请直接给出是或者否。",
    "图中有阳台吗？请直接给出是或者否。",
    "图中有植物吗？请直接给出是或者否。",
    "这张照片光线充足吗？请直接给出是或者否。",
    "图中有餐桌吗？请直接给出是或者否。",
    "图中有文字或者水印吗？请直接给出是或者否。",
};
constexpr int kMaxQuestions = int(sizeof kListingQuestions / sizeof kListingQuestions[0]);

const char* kUsage =
    "usage: fovea bench --model DIR (--photos DIR [--count N] | --images DIR [--count N]) [options]\n"
    "  --photos DIR: the listing-photo mix (crop + resize to the resolution mix, JPEG q88) from these photos\n"
    "  --images DIR: the files as they are (each once unless --count)\n"
    "  --prompt TEXT (default: the bunk-bed question of PERF.md)  --max-tokens N (1)\n"
    "  --questions K (1..16): ask every image K distinct questions (--prompt first), one request each, the\n"
    "    image's questions submitted together; QPM counts questions; reports prompt tokens computed vs needed\n"
    "  --first-tokens FILE: one JSON line per request {image, question, tokens}\n"
    "  --concurrency N (256)  --warmup N (2)  --seed N\n"
    "  --gemm M,N,K (default 8192,8192,4096 on CUDA, 256,256,256 on CPU)  --gemm-seconds S (2)\n"
    "  --json FILE (bench.json)  --svg FILE (bench.svg)  --save-workload DIR  --decode-reps N (2)\n"
    "  --vit-alone N: instead of the workload, time the ViT + projector alone (as the engine runs them) on one\n"
    "    batch of N tiles cut from the images: one warm-up batch, then --vit-reps R (3) batches, as\n"
    "    bench/gpu/reference.py times transformers; --vit-hold S: then repeat it S seconds, timing the last half\n"
    "Outputs ignore EOS, so every request generates --max-tokens tokens. With --max-tokens N > 1 the same\n"
    "requests then run again with max_tokens 1 and N (each --decode-reps times, the best kept): the difference\n"
    "is N - 1 decode steps of the whole batch, reported as ms per decode step.\n";

struct BenchConfig {
  EngineConfig engine;
  TilingOptions tiling;
  std::string photos, images, prompt, json_path, svg_path, save_dir;
  std::string first_tokens_path;
  int count = 0, max_tokens = 1, concurrency = 256, warmup = 2, decode_reps = 2, questions = 1;
  uint64_t seed = 0;
  std::vector<int> gemm;
  double gemm_seconds = 2.0;
  VisionTimingOptions vit_alone;  // tiles 0: the workload runs
};

BenchConfig parse_bench_args(const std::vector<std::string>& raw) {
  const Args args(raw);
  std::vector<std::string> known = engine_option_flags();
  known.insert(known.end(), {"--photos", "--images", "--count", "--prompt", "--max-tokens", "--concurrency",
                             "--warmup", "--seed", "--gemm", "--gemm-seconds", "--json", "--svg", "--save-workload",
                             "--decode-reps", "--questions", "--first-tokens", "--vit-alone", "--vit-reps",
                             "--vit-hold", "--help"});
  args.allow_only(known);
  if (args.has("--help")) throw UsageError("");
  BenchConfig c;
  c.engine = parse_engine_options(args);
  c.tiling = parse_tiling_options(args);
  c.photos = args.get("--photos");
  c.images = args.get("--images");
  if (c.photos.empty() == c.images.empty()) throw UsageError("give exactly one of --photos DIR and --images DIR");
  c.prompt = args.get("--prompt", kDefaultQuestion);
  c.json_path = args.get("--json", "bench.json");
  c.svg_path = args.get("--svg", "bench.svg");
  c.save_dir = args.get("--save-workload");
  c.first_tokens_path = args.get("--first-tokens");
  c.count = args.get_int("--count", c.photos.empty() ? 0 : 32);
  c.max_tokens = args.get_int("--max-tokens", 1);
  c.concurrency = args.get_int("--concurrency", 256);
  c.warmup = args.get_int("--warmup", 2);
  c.seed = uint64_t(args.get_int("--seed", 0));
  c.gemm_seconds = args.get_double("--gemm-seconds", 2.0);
  c.decode_reps = args.get_int("--decode-reps", 2);
  c.questions = args.get_int("--questions", 1);
  c.vit_alone.tiles = args.get_int("--vit-alone", 0);
  c.vit_alone.reps = args.get_int("--vit-reps", 3);
  c.vit_alone.hold_seconds = args.get_double("--vit-hold", 0);
  if (c.vit_alone.tiles < 0 || c.vit_alone.reps < 1 || c.vit_alone.hold_seconds < 0)
    throw UsageError("--vit-alone and --vit-hold must not be negative, --vit-reps at least 1");
  if (args.has("--gemm")) {
    const std::string spec = args.get("--gemm");
    int m = 0, n = 0, k = 0;
    char tail = 0;
    if (std::sscanf(spec.c_str(), "%d,%d,%d%c", &m, &n, &k, &tail) != 3 || m <= 0 || n <= 0 || k <= 0)
      throw UsageError("--gemm needs M,N,K");
    c.gemm = {m, n, k};
  }
  if (c.count < 0 || c.max_tokens < 1 || c.concurrency < 1 || c.warmup < 0 || c.decode_reps < 1)
    throw UsageError("bad count option");
  if (c.questions < 1 || c.questions > kMaxQuestions) throw UsageError(str("--questions must be 1 to ", kMaxQuestions));
  return c;
}

// The template's text tokens around one image, so a request's tile count follows from its prompt length.
int text_tokens_around_image(const ModelDesc& desc, const std::string& model_dir, const std::string& prompt) {
  try {
    auto tokenizer = load_tokenizer(model_dir);
    const PromptIds ids = build_chat_prompt(desc, *tokenizer, "", prompt, {1});
    return int(ids.ids.size()) - desc.vision.tokens_per_tile();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench: cannot tokenise the prompt (%s); tile counts are estimates\n", e.what());
    return 0;
  }
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  FOVEA_CHECK(out, "cannot write ", path);
  out << text;
  FOVEA_CHECK(out.good(), "cannot write ", path);
}

std::vector<WorkloadImage> build_workload(const BenchConfig& c) {
  const double start = monotonic_seconds();
  std::vector<WorkloadImage> images = c.photos.empty() ? directory_workload(c.images, c.count)
                                                       : listing_photo_workload(c.photos, c.count, c.seed);
  std::fprintf(stderr, "bench: workload of %zu images ready in %.2f s\n", images.size(), monotonic_seconds() - start);
  if (!c.save_dir.empty()) {
    std::filesystem::create_directories(c.save_dir);
    for (size_t i = 0; i < images.size(); ++i) {
      char name[64];
      std::snprintf(name, sizeof name, "/%05zu.jpg", i);
      write_text(c.save_dir + name, images[i].bytes);
    }
  }
  return images;
}

Request make_request(const BenchConfig& c, const WorkloadImage& image, int question = 0) {
  Request r;
  r.images.push_back(ImageInput{image.bytes, image.label});
  r.prompt = question == 0 ? c.prompt : kListingQuestions[question];
  r.params.max_tokens = c.max_tokens;
  r.params.ignore_eos = true;  // a fixed workload: output lengths must not depend on the weights
  r.tiling = c.tiling.tiling;
  r.max_tiles = c.tiling.max_tiles;
  return r;
}

BenchResult run_bench(const BenchConfig& c, InferenceService& service, const std::vector<WorkloadImage>& images,
                      const ModelDesc& desc, int text_tokens) {
  // Warm-up requests are not timed: first-call costs (allocations, kernel selection) are not throughput.
  PumpCallbacks warm;
  warm.make_request = [&](size_t i, Request* r, std::string*) { *r = make_request(c, images[i % images.size()]); return true; };
  warm.on_finished = [](std::vector<FinishedRequest>&) {};
  pump_requests(service, size_t(c.warmup), c.concurrency, warm);

  BenchResult result;
  // Request i asks image i / K question i % K: an image's questions are submitted together, as `fovea run`
  // orders them.
  const size_t k = size_t(c.questions);
  result.requests = int(images.size() * k);
  const EngineStats before = service.stats();
  const int tpt = std::max(1, desc.vision.tokens_per_tile());
  std::string first_tokens;
  const double start = monotonic_seconds();
  PumpCallbacks cb;
  cb.make_request = [&](size_t i, Request* r, std::string*) {
    *r = make_request(c, images[i / k], int(i % k));
    return true;
  };
  cb.on_finished = [&](std::vector<FinishedRequest>& done) {
    for (const auto& f : done) {
      if (!c.first_tokens_path.empty())
        first_tokens += nlohmann::json{{"image", f.index / k}, {"question", f.index % k}, {"tokens", f.tokens}}
                            .dump() + "\n";
      if (!f.final.error.empty()) {
        if (result.failed++ < 3) std::fprintf(stderr, "bench: %s failed: %s\n", images[f.index / k].label.c_str(), f.final.error.c_str());
        continue;
      }
      const int tiles = std::max(1, int(std::lround(double(f.final.prompt_tokens - text_tokens) / tpt)));
      const RequestFlops fl = request_flops(desc, tiles, f.final.prompt_tokens, f.final.completion_tokens);
      result.flops.vit += fl.vit;
      result.flops.projector += fl.projector;
      result.flops.llm += fl.llm;
      result.flops.lm_head += fl.lm_head;
      result.total_tiles += tiles;
      result.prompt_tokens += f.final.prompt_tokens;
      result.output_tokens += f.final.completion_tokens;
      result.latencies_ms.push_back(f.final.ms);
    }
    const int finished = (result.timeline.empty() ? 0 : result.timeline.back().second) + int(done.size());
    result.timeline.emplace_back(monotonic_seconds() - start, finished);
  };
  pump_requests(service, images.size() * k, c.concurrency, cb);
  result.wall_s = monotonic_seconds() - start;
  result.engine_stats = stats_delta(service.stats(), before);
  const EngineStats& run = result.engine_stats;
  if (!c.first_tokens_path.empty()) write_text(c.first_tokens_path, first_tokens);
  if (c.questions > 1) {
    result.questions.per_image = c.questions;
    result.questions.images = int(images.size());
    result.questions.prompt_tokens = result.prompt_tokens;
    result.questions.prefill_tokens = run.prefill_tokens;
    result.questions.prefix_hit_tokens = run.prefix_cache_hit_tokens;
    result.questions.inflight_waits = run.inflight_prefix_waits;
  }
  result.stage_ms = {{"preprocess", run.preprocess_ms}, {"vit", run.vit_ms}, {"llm", run.llm_ms}};
  for (const EngineStats& e : run.engines) result.engines.push_back({e.engine, e.requests_finished, e.failed});
  return result;
}

struct PassTime {
  double seconds = 0;  // wall
  double llm_ms = 0;   // EngineStats::llm_ms over the pass
  int fewest_tokens = 0;
};

// One timed pass of all images with `max_tokens`.
PassTime timed_pass(const BenchConfig& c, InferenceService& service,
                                  const std::vector<WorkloadImage>& images, int max_tokens) {
  BenchConfig pass = c;
  pass.max_tokens = max_tokens;
  int fewest = max_tokens;
  PumpCallbacks cb;
  cb.make_request = [&](size_t i, Request* r, std::string*) { *r = make_request(pass, images[i]); return true; };
  cb.on_finished = [&](std::vector<FinishedRequest>& done) {
    for (const auto& f : done) {
      FOVEA_CHECK(f.final.error.empty(), "decode pass: ", images[f.index].label, " failed: ", f.final.error);
      fewest = std::min(fewest, f.final.completion_tokens);
    }
  };
  const double llm_before = service.stats().llm_ms;
  const double start = monotonic_seconds();
  pump_requests(service, images.size(), c.concurrency, cb);
  return {monotonic_seconds() - start, service.stats().llm_ms - llm_before, fewest};
}

// After the main run (which warmed the vision and prefix caches and recorded the decode graphs), the same
// requests with max_tokens 1 and N, alternating, each pass best of decode_reps: T_N - T_1 is N - 1 steps.
DecodeMeasure measure_decode(const BenchConfig& c, InferenceService& service,
                             const std::vector<WorkloadImage>& images) {
  DecodeMeasure d;
  d.requests = int(images.size());
  d.max_tokens = c.max_tokens;
  d.min_output_tokens = c.max_tokens;
  d.t1_s = d.tn_s = d.llm_ms_1 = d.llm_ms_n = 1e30;
  for (int rep = 0; rep < c.decode_reps; ++rep) {
    const PassTime one = timed_pass(c, service, images, 1);
    d.t1_s = std::min(d.t1_s, one.seconds);
    d.llm_ms_1 = std::min(d.llm_ms_1, one.llm_ms);
    const PassTime n = timed_pass(c, service, images, c.max_tokens);
    d.tn_s = std::min(d.tn_s, n.seconds);
    d.llm_ms_n = std::min(d.llm_ms_n, n.llm_ms);
    d.min_output_tokens = std::min(d.min_output_tokens, n.fewest_tokens);
  }
  if (d.min_output_tokens < d.max_tokens)
    std::fprintf(stderr, "bench: some requests stopped after %d of %d tokens; ms per step is a lower bound\n",
                 d.min_output_tokens, d.max_tokens);
  if (d.requests > c.concurrency)
    std::fprintf(stderr, "bench: %d requests over concurrency %d do not decode as one batch\n", d.requests,
                 c.concurrency);
  return d;
}

// --vit-alone: the ViT's own figure, no workload run; the JSON holds the model, the settings and the timing.
int bench_vit_alone(const BenchConfig& c, const std::vector<WorkloadImage>& workload) {
  std::vector<std::string> images;
  for (const WorkloadImage& w : workload) images.push_back(w.bytes);
  const VisionTiming t = time_vision(c.engine, images, c.vit_alone);
  std::printf("ViT + projector alone: %d tiles per batch (from %d images; ViT batches of up to %d), %.3f ms per tile "
              "over %d batches after a warm-up\n", t.tiles, t.images, t.max_step_tiles, t.ms_per_tile, t.reps);
  if (t.hold_seconds > 0)
    std::printf("held %.1f s: %.3f ms per tile over the last %d batches\n", t.hold_seconds, t.held_ms_per_tile,
                t.held_batches);
  const nlohmann::json j = {{"model", c.engine.model_dir}, {"backend", c.engine.backend},
                            {"quantization", c.engine.quantization}, {"load_format", c.engine.load_format},
                            {"vit_alone", {{"tiles", t.tiles}, {"images", t.images},
                                           {"max_step_tiles", t.max_step_tiles}, {"reps", t.reps},
                                           {"ms_per_tile", t.ms_per_tile}, {"hold_seconds", t.hold_seconds},
                                           {"held_batches", t.held_batches},
                                           {"held_ms_per_tile", t.held_ms_per_tile}}}};
  write_text(c.json_path, j.dump(2) + "\n");
  std::printf("wrote %s\n", c.json_path.c_str());
  return 0;
}

int bench_main(const std::vector<std::string>& raw) {
  BenchConfig c;
  try {
    c = parse_bench_args(raw);
  } catch (const UsageError& e) {
    return print_usage_error("bench", e, kUsage + engine_options_usage());
  }
  const std::vector<WorkloadImage> images = build_workload(c);
  FOVEA_CHECK(!images.empty(), "the workload is empty");
  if (c.vit_alone.tiles > 0) return bench_vit_alone(c, images);
  const ModelDesc desc = load_model_desc(c.engine.model_dir);

  // The GEMM peak first, with the device otherwise idle; its buffers are gone before the engine allocates.
  const bool cuda = c.engine.backend == "cuda" || (c.engine.backend == "auto" && cuda_backend_available());
  const std::vector<int> shape = !c.gemm.empty() ? c.gemm : cuda ? std::vector<int>{8192, 8192, 4096}
                                                                 : std::vector<int>{256, 256, 256};
  const GemmPeak peak = measure_gemm_peak(c.engine.backend, shape[0], shape[1], shape[2], c.gemm_seconds,
                                          c.engine.quantization.rfind("fp8", 0) == 0);
  std::fprintf(stderr, "bench: GEMM peak %.3f TFLOP/s on %s\n", peak.tflops, peak.backend.c_str());

  auto service = make_engine_service(c.engine);
  BenchResult result = run_bench(c, *service, images, desc, text_tokens_around_image(desc, c.engine.model_dir, c.prompt));
  if (c.max_tokens > 1 && c.questions == 1 && result.failed == 0) result.decode = measure_decode(c, *service, images);
  service->drain();
  result.model = service->model_name();
  result.backend = peak.backend;
  result.workload = c.photos.empty() ? "directory" : "listing-photos";
  result.tiling = c.tiling.tiling == TilingPolicy::Compact ? "compact" : "official";
  result.quantization = c.engine.quantization;
  result.gemm = peak;

  write_text(c.json_path, bench_json(result).dump(2) + "\n");
  write_text(c.svg_path, bench_svg(result));
  std::printf("%s", bench_table(result).c_str());
  std::printf("wrote %s and %s\n", c.json_path.c_str(), c.svg_path.c_str());
  return result.failed > 0 ? 1 : 0;
}

const CommandRegistration registration{"bench", "throughput benchmark: QPM, tokens/s, stage times, MFU", bench_main};

}  // namespace
}  // namespace fovea
