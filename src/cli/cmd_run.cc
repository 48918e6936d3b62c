// fovea run: a batch job from a tasks JSONL (or a directory of images) to a results JSONL, resumable after any
// kill. Exit status: 0 every task succeeded, 1 some failed (or the job could not start), 2 usage error.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "cli/command.h"
#include "core/error.h"
#include "jobs/batch_job.h"
#include "engine/service.h"

namespace fovea {
namespace {

const char* kUsage =
    "usage: fovea run --model DIR (--input TASKS.jsonl | --images DIR --prompt TEXT) --output RESULTS.jsonl\n"
    "  tasks: {\"id\", \"image\"?, \"prompt\", \"system\"?, \"max_tokens\"?, \"answers\"?} per line (no image:\n"
    "         text only; relative image paths: from\n"
    "         the tasks file's directory)\n"
    "  --backend cpu|cuda|auto   --max-tiles N   --policy official|compact   --max-tokens N (default 1)\n"
    "  --answers A,B (log-probs of these answers)   --concurrency N (in flight, default 64)\n"
    "  --kv-blocks N   --progress-interval SECONDS (non-terminal progress lines, default 10)   --quiet\n"
    "  --no-cuda-graphs (launch decode steps op by op instead of replaying recordings)\n"
    "  --vit-graphs (replay ViT batches as recordings per tile-count bucket too; CUDA only)\n"
    "  --cpu-normalize (tiles leave the host as normalised float32, not as bytes normalised on the device)\n"
    "  --quantization none|fp8|fp8-all (W8A8 E4M3, dynamic per-tensor scales: the LLM's projections;\n"
    "    fp8-all: the ViT's linears too)\n"
    "  --w4 auto|packed|dequantize (4-bit AWQ/GPTQ checkpoints: keep the LLM's linears 4-bit on the device\n"
    "    (W4A16) or load them as bf16; auto: packed on CUDA)\n"
    "  --dump-logits PATH (first-token float logits of each successful task: PATH.f32 rows of vocab floats,\n"
    "         PATH.json {\"vocab\", \"rows\": {id: row}}; resumes with the results)\n"
    "Running the same command again resumes: ids already in the output are skipped (--retry-failed: except\n"
    "those whose record is an error, which are removed from the output and run again).\n";

struct UsageError {
  std::string message;
};

struct RunConfig {
  EngineConfig engine;
  TaskDefaults defaults;
  BatchJobOptions job;
  std::string input, images, output;
};

RunConfig parse_run_args(const std::vector<std::string>& raw) {
  const Args args(raw);
  try {
    args.allow_only({"--model", "--input", "--output", "--images", "--prompt", "--backend", "--max-tiles", "--policy",
                     "--max-tokens", "--answers", "--concurrency", "--kv-blocks", "--progress-interval", "--quiet",
                     "--retry-failed", "--no-cuda-graphs", "--vit-graphs", "--cpu-normalize", "--quantization", "--w4",
                     "--dump-logits", "--help"});
  } catch (const Error& e) {
    const std::string m = e.what();
    throw UsageError{m.substr(m.find("unknown option"))};
  }
  if (args.has("--help")) throw UsageError{""};
  if (!args.positional().empty()) throw UsageError{"unexpected argument " + args.positional()[0]};
  RunConfig c;
  c.engine.model_dir = args.get("--model");
  c.engine.cuda_graphs = !args.has("--no-cuda-graphs");
  c.engine.vit_graphs = args.has("--vit-graphs");
  c.engine.gpu_normalize = !args.has("--cpu-normalize");
  c.engine.quantization = args.get("--quantization", "none");
  c.engine.w4 = args.get("--w4", "auto");
  c.input = args.get("--input");
  c.images = args.get("--images");
  c.output = args.get("--output");
  if (c.engine.model_dir.empty()) throw UsageError{"--model DIR is required"};
  if (c.output.empty()) throw UsageError{"--output FILE is required"};
  if (c.input.empty() == c.images.empty()) throw UsageError{"give exactly one of --input FILE and --images DIR"};
  if (!c.images.empty() && !args.has("--prompt")) throw UsageError{"--images needs --prompt TEXT"};
  try {
    c.engine.backend = args.get("--backend", "auto");
    c.engine.kv_blocks = args.get_int("--kv-blocks", 0);
    c.defaults.prompt = args.get("--prompt");
    c.defaults.max_tokens = args.get_int("--max-tokens", 1);
    c.defaults.answers = split_list(args.get("--answers"));
    c.job.concurrency = args.get_int("--concurrency", 64);
    c.job.max_tiles = args.get_int("--max-tiles", 0);
    c.job.progress_interval_s = args.get_double("--progress-interval", 10.0);
  } catch (const Error& e) {
    const std::string m = e.what();
    throw UsageError{m.substr(m.find("--"))};
  }
  const std::string policy = args.get("--policy", "official");
  if (policy != "official" && policy != "compact") throw UsageError{"--policy must be official or compact"};
  c.job.tiling = policy == "compact" ? TilingPolicy::Compact : TilingPolicy::Official;
  if (c.engine.backend != "cpu" && c.engine.backend != "cuda" && c.engine.backend != "auto")
    throw UsageError{"--backend must be cpu, cuda or auto"};
  if (c.defaults.max_tokens < 1) throw UsageError{"--max-tokens must be at least 1"};
  if (c.job.concurrency < 1) throw UsageError{"--concurrency must be at least 1"};
  if (c.job.max_tiles < 0) throw UsageError{"--max-tiles must be positive"};
  c.job.progress = !args.has("--quiet");
  c.job.retry_failed = args.has("--retry-failed");
  c.job.dump_logits_path = args.get("--dump-logits");
  if (args.has("--dump-logits") && c.job.dump_logits_path.empty()) throw UsageError{"--dump-logits needs a PATH"};
  c.job.progress_terminal = ::isatty(STDERR_FILENO) == 1;
  return c;
}

int run_main(const std::vector<std::string>& raw) {
  RunConfig config;
  try {
    config = parse_run_args(raw);
  } catch (const UsageError& e) {
    if (!e.message.empty()) std::fprintf(stderr, "fovea run: %s\n", e.message.c_str());
    std::fputs(kUsage, stderr);
    return e.message.empty() ? 0 : 2;
  }
  const TaskList tasks = config.input.empty() ? tasks_from_image_dir(config.images, config.defaults)
                                              : read_tasks_jsonl(config.input, config.defaults);
  for (const auto& line : tasks.skipped_lines) std::fprintf(stderr, "fovea run: skipped %s\n", line.c_str());
  if (tasks.duplicate_ids > 0)
    std::fprintf(stderr, "fovea run: dropped %d tasks whose id appeared earlier\n", tasks.duplicate_ids);
  auto service = make_engine_service(config.engine);
  const BatchJobSummary summary = run_batch_job(*service, tasks, config.output, config.job);
  service->drain();
  const bool failed = summary.any_failed() || !tasks.skipped_lines.empty();
  return failed ? 1 : 0;
}

const CommandRegistration registration{"run", "batch job: tasks JSONL (or an image directory) -> results JSONL",
                                       run_main};

}  // namespace
}  // namespace fovea
