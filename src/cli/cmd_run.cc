// fovea run: a batch job from a tasks JSONL (or a directory of images) to a results JSONL, resumable after any
// kill. Exit status: 0 every task succeeded, 1 some failed (or the job could not start), 2 usage error.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "cli/command.h"
#include "cli/engine_options.h"
#include "core/error.h"
#include "jobs/batch_job.h"
#include "jobs/job_input.h"
#include "fovea/engine.h"

namespace fovea {
namespace {

const char* kUsage =
    "usage: fovea run --model DIR (--input TASKS.jsonl | --images DIR --prompt TEXT) --output RESULTS.jsonl\n"
    "  tasks: {\"id\", \"image\"?, \"prompt\", \"system\"?, \"max_tokens\"?, \"answers\"?} per line (no image:\n"
    "         text only; relative image paths: from\n"
    "         the tasks file's directory; http://, https:// and s3://bucket/key URLs are downloaded);\n"
    "         or OpenAI batch lines ({\"custom_id\", \"method\", \"url\": \"/v1/chat/completions\", \"body\"})\n"
    "         -> OpenAI batch output records, keyed by custom_id (images as the tasks' are, URLs prefetched);\n"
    "         \"prompts\": [...] instead of \"prompt\": one record per question, id \"<id>#<k>\" and\n"
    "         \"question_index\" k (a line whose id was used before is dropped, naming both lines; exit 1)\n"
    "         \"messages\": [...] instead of \"image\" + \"prompt\": OpenAI chat messages (system and user; images\n"
    "         as image_url parts, paths and URLs as \"image\" takes them; the line's \"system\" goes first)\n"
    "  --input-format auto|tasks|openai (auto: each line by its fields, an OpenAI batch line has custom_id,\n"
    "         method, url and body; a bad line fails alone)\n"
    "         \"choices\": [...]: answer with the most likely choice (\"choice_logprobs\")\n"
    "  URL images: --fetch-timeout SECONDS (per attempt, 60)  --fetch-retries N (5xx/timeouts, 3)\n"
    "    --fetch-parallel N (downloads at once, 8)  --prefetch N (tasks fetched ahead, 32)  --ca-file PEM\n"
    "    --s3-endpoint URL (else AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL; keys from AWS_* or ~/.aws)\n"
    "  --max-image-bytes N (per image, files and URLs; default 64 MiB)\n"
    "  --max-tokens N (default 1)   --answers A,B (log-probs of these answers)\n"
    "  --concurrency N (in flight, default 64)\n"
    "  --progress-interval SECONDS (non-terminal progress lines, default 10)   --quiet\n"
    "  --dump-logits PATH (first-token float logits of each successful task: PATH.f32 rows of vocab floats,\n"
    "         PATH.json {\"vocab\", \"rows\": {id: row}}; resumes with the results)\n"
    "Running the same command again resumes: ids already in the output are skipped (--retry-failed: except\n"
    "those whose record is an error, which are removed from the output and run again).\n";

struct RunConfig {
  EngineConfig engine;
  TaskDefaults defaults;
  BatchJobOptions job;
  std::string input, images, output;
  InputFormat input_format = InputFormat::Auto;
};

RunConfig parse_run_args(const std::vector<std::string>& raw) {
  const Args args(raw);
  std::vector<std::string> known = engine_option_flags();
  known.insert(known.end(), {"--input", "--output", "--images", "--prompt", "--max-tokens", "--answers",
                             "--concurrency", "--progress-interval", "--quiet", "--retry-failed", "--dump-logits",
                             "--fetch-timeout", "--fetch-retries", "--fetch-parallel", "--prefetch", "--ca-file",
                             "--s3-endpoint", "--max-image-bytes", "--input-format", "--help"});
  args.allow_only(known);
  if (args.has("--help")) throw UsageError("");
  if (!args.positional().empty()) throw UsageError("unexpected argument " + args.positional()[0]);
  RunConfig c;
  c.engine = parse_engine_options(args);
  const TilingOptions tiling = parse_tiling_options(args);
  c.job.tiling = tiling.tiling;
  c.job.max_tiles = tiling.max_tiles;
  c.input = args.get("--input");
  c.images = args.get("--images");
  c.output = args.get("--output");
  if (c.output.empty()) throw UsageError("--output FILE is required");
  if (c.input.empty() == c.images.empty()) throw UsageError("give exactly one of --input FILE and --images DIR");
  if (!c.images.empty() && !args.has("--prompt")) throw UsageError("--images needs --prompt TEXT");
  if (!parse_input_format(args.get("--input-format", "auto"), &c.input_format))
    throw UsageError("--input-format must be auto, tasks or openai");
  c.defaults.prompt = args.get("--prompt");
  c.defaults.max_tokens = args.get_int("--max-tokens", 1);
  c.defaults.answers = split_list(args.get("--answers"));
  c.job.concurrency = args.get_int("--concurrency", 64);
  c.job.progress_interval_s = args.get_double("--progress-interval", 10.0);
  c.job.fetch.timeout_ms = int(args.get_double("--fetch-timeout", 60.0) * 1000);
  c.job.fetch.connect_timeout_ms = std::min(c.job.fetch.timeout_ms, 10000);
  c.job.fetch.retries = args.get_int("--fetch-retries", 3);
  c.job.fetch_parallel = args.get_int("--fetch-parallel", 8);
  c.job.prefetch_window = args.get_int("--prefetch", 32);
  c.job.max_image_bytes = int64_t(args.get_double("--max-image-bytes", double(c.job.max_image_bytes)));
  if (c.defaults.max_tokens < 1) throw UsageError("--max-tokens must be at least 1");
  if (c.job.concurrency < 1) throw UsageError("--concurrency must be at least 1");
  if (c.job.fetch.timeout_ms < 1 || c.job.max_image_bytes < 1 || c.job.fetch.retries < 0 ||
      c.job.fetch_parallel < 1 || c.job.prefetch_window < 1)
    throw UsageError("--fetch-timeout, --fetch-parallel, --prefetch and --max-image-bytes must be positive, "
                     "--fetch-retries at least 0");
  c.job.fetch.ca_file = args.get("--ca-file");
  c.job.fetch.s3_endpoint = args.get("--s3-endpoint");
  c.job.progress = !args.has("--quiet");
  c.job.retry_failed = args.has("--retry-failed");
  c.job.dump_logits_path = args.get("--dump-logits");
  if (args.has("--dump-logits") && c.job.dump_logits_path.empty()) throw UsageError("--dump-logits needs a PATH");
  c.job.progress_terminal = ::isatty(STDERR_FILENO) == 1;
  return c;
}

int run_main(const std::vector<std::string>& raw) {
  RunConfig config;
  try {
    config = parse_run_args(raw);
  } catch (const UsageError& e) {
    return print_usage_error("run", e, kUsage + engine_options_usage());
  }
  JobInput input;
  if (config.input.empty()) input.tasks = tasks_from_image_dir(config.images, config.defaults);
  else input = read_job_input(config.input, config.input_format, config.defaults);
  report_input_problems(input);
  auto service = make_engine_service(config.engine);
  const BatchJobSummary summary = run_job_input(*service, input, config.output, config.job);
  service->drain();
  const bool failed = summary.any_failed() || !input.skipped_lines.empty() || !input.duplicates.empty();
  return failed ? 1 : 0;
}

const CommandRegistration registration{"run", "batch job: tasks JSONL (or an image directory) -> results JSONL",
                                       run_main};

}  // namespace
}  // namespace fovea
