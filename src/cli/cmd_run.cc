// fovea run: a batch job from a tasks JSONL (or a directory of images) to a results JSONL, resumable after any
// kill. Exit status: 0 every task succeeded, 1 some failed (or the job could not start), 2 usage error.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "cli/command.h"
#include "core/error.h"
#include "jobs/batch_job.h"
#include "jobs/openai_batch.h"
#include "fovea/engine.h"

namespace fovea {
namespace {

const char* kUsage =
    "usage: fovea run --model DIR (--input TASKS.jsonl | --images DIR --prompt TEXT) --output RESULTS.jsonl\n"
    "  tasks: {\"id\", \"image\"?, \"prompt\", \"system\"?, \"max_tokens\"?, \"answers\"?} per line (no image:\n"
    "         text only; relative image paths: from\n"
    "         the tasks file's directory; http://, https:// and s3://bucket/key URLs are downloaded);\n"
    "         or an OpenAI batch file ({\"custom_id\", \"method\", \"url\": \"/v1/chat/completions\", \"body\"}\n"
    "         per line, detected) -> OpenAI batch output, keyed by custom_id;\n"
    "         \"prompts\": [...] instead of \"prompt\": one record per question, id \"<id>#<k>\";\n"
    "         \"choices\": [...]: answer with the most likely choice (\"choice_logprobs\")\n"
    "  URL images: --fetch-timeout SECONDS (per attempt, 60)  --fetch-retries N (5xx/timeouts, 3)\n"
    "    --fetch-parallel N (downloads at once, 8)  --prefetch N (tasks fetched ahead, 32)  --ca-file PEM\n"
    "    --s3-endpoint URL (else AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL; keys from AWS_* or ~/.aws)\n"
    "  --max-image-bytes N (per image, files and URLs; default 64 MiB)\n"
    "  --backend cpu|cuda|auto   --max-tiles N   --policy official|compact   --max-tokens N (default 1)\n"
    "  --gpus all|0,1,3 (one engine per GPU, data parallel)   --replicas N (CPU backend: N engines)\n"
    "  --answers A,B (log-probs of these answers)   --concurrency N (in flight, default 64)\n"
    "  --kv-blocks N   --progress-interval SECONDS (non-terminal progress lines, default 10)   --quiet\n"
    "  --no-cuda-graphs (launch decode steps op by op instead of replaying recordings)\n"
    "  --vit-graphs (replay ViT batches as recordings per tile-count bucket too; CUDA only)\n"
    "  --cpu-normalize (tiles leave the host as normalised float32, not as bytes normalised on the device)\n"
    "  --quantization none|fp8|fp8-tensor|fp8-channel|fp8-block|fp8-channel-act128|fp8-all|w4a16 (W8A8 E4M3\n"
    "    for the LLM's projections;\n"
    "    scales per tensor, per channel x per token, 128x128 x 1x128 blocks, or per channel x 1x128;\n"
    "    fp8 = fp8-channel;\n"
    "    fp8-all: fp8 for the ViT's linears too; w4a16: the LLM's projections 4-bit: a 4-bit\n"
    "    checkpoint kept packed, or 4-bit dummy weights)\n"
    "  --w4 auto|packed|dequantize (4-bit AWQ/GPTQ checkpoints: keep the LLM's linears 4-bit on the device\n"
    "    (W4A16) or load them as bf16; auto: packed on CUDA)\n"
    "  --load-format auto|dummy (dummy: random weights of config.json's shapes made on the device,\n"
    "    no safetensors read; for benchmarking a model whose checkpoint is not at hand)\n"
    "  --batch-invariant (a request's outputs independent of its batch-mates; CUDA: slower kernels)\n"
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
                     "--retry-failed", "--no-cuda-graphs", "--vit-graphs", "--cpu-normalize", "--quantization", "--w4", "--load-format", "--batch-invariant",
                     "--dump-logits", "--fetch-timeout", "--fetch-retries", "--fetch-parallel", "--prefetch",
                     "--ca-file", "--s3-endpoint", "--max-image-bytes", "--gpus", "--replicas", "--help"});
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
  c.engine.batch_invariant = args.has("--batch-invariant");
  c.engine.w4 = args.get("--w4", "auto");
  c.engine.load_format = args.get("--load-format", "auto");
  c.input = args.get("--input");
  c.images = args.get("--images");
  c.output = args.get("--output");
  if (c.engine.model_dir.empty()) throw UsageError{"--model DIR is required"};
  if (c.output.empty()) throw UsageError{"--output FILE is required"};
  if (c.input.empty() == c.images.empty()) throw UsageError{"give exactly one of --input FILE and --images DIR"};
  if (!c.images.empty() && !args.has("--prompt")) throw UsageError{"--images needs --prompt TEXT"};
  try {
    c.engine.backend = args.get("--backend", "auto");
    c.engine.gpus = args.get("--gpus");
    c.engine.kv_blocks = args.get_int("--kv-blocks", 0);
    c.engine.replicas = args.get_int("--replicas", 1);
    c.defaults.prompt = args.get("--prompt");
    c.defaults.max_tokens = args.get_int("--max-tokens", 1);
    c.defaults.answers = split_list(args.get("--answers"));
    c.job.concurrency = args.get_int("--concurrency", 64);
    c.job.max_tiles = args.get_int("--max-tiles", 0);
    c.job.progress_interval_s = args.get_double("--progress-interval", 10.0);
    c.job.fetch.timeout_ms = int(args.get_double("--fetch-timeout", 60.0) * 1000);
    c.job.fetch.connect_timeout_ms = std::min(c.job.fetch.timeout_ms, 10000);
    c.job.fetch.retries = args.get_int("--fetch-retries", 3);
    c.job.fetch_parallel = args.get_int("--fetch-parallel", 8);
    c.job.prefetch_window = args.get_int("--prefetch", 32);
    c.job.max_image_bytes = int64_t(args.get_double("--max-image-bytes", double(c.job.max_image_bytes)));
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
  if (c.job.fetch.timeout_ms < 1 || c.job.max_image_bytes < 1 || c.job.fetch.retries < 0 ||
      c.job.fetch_parallel < 1 || c.job.prefetch_window < 1)
    throw UsageError{"--fetch-timeout, --fetch-parallel, --prefetch and --max-image-bytes must be positive, "
                     "--fetch-retries at least 0"};
  c.job.fetch.ca_file = args.get("--ca-file");
  c.job.fetch.s3_endpoint = args.get("--s3-endpoint");
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
  if (!config.input.empty() && is_openai_batch_file(config.input)) {
    auto service = make_engine_service(config.engine);
    const BatchJobSummary summary = run_openai_batch_job(*service, config.input, config.output, config.job);
    service->drain();
    return summary.any_failed() ? 1 : 0;
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
