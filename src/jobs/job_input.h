// The input of `fovea run`, line by line: each line is a task ({"id", "prompt", ...}, jobs/batch_tasks.h) or an
// OpenAI batch request ({"custom_id", "method", "url", "body"}, jobs/openai_batch.h). The format is recognised per
// line (--input-format auto) or forced (tasks | openai), so one bad line fails alone and never decides how the
// other lines are read. Lines are bounded (kMaxInputLineBytes) and the file must be a regular file or a pipe:
// `--input /dev/zero` is refused instead of growing one endless line until memory runs out.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "jobs/batch_tasks.h"
#include "jobs/openai_batch.h"

namespace fovea {

enum class InputFormat { Auto, Tasks, OpenAI };
// "auto" | "tasks" | "openai"; false for anything else.
bool parse_input_format(const std::string& name, InputFormat* out);

// The longest input line read (a line with a few data: URL images of the 64 MiB default limit fits).
constexpr int64_t kMaxInputLineBytes = 512ll << 20;

struct JobInput {
  TaskList tasks;                        // the tasks lines, "prompts" expanded; tasks.skipped_lines unused
  std::vector<OpenAIBatchLine> openai;   // the OpenAI batch lines
  std::vector<std::string> skipped_lines;  // lines that cannot get a record at all: reported, exit status 1
  std::vector<std::string> duplicates;     // later lines whose id was used before: dropped, reported
};

// Reads `path` (throws fovea::Error when it cannot be read at all: missing, a directory or a device).
JobInput read_job_input(const std::string& path, InputFormat format, const TaskDefaults& defaults);

// Says on stderr which lines were skipped or dropped.
void report_input_problems(const JobInput& input);

// The one job loop (jobs/job_loop.h) over every record of `input`.
BatchJobSummary run_job_input(InferenceService& service, const JobInput& input, const std::string& output_path,
                              const BatchJobOptions& options);

}  // namespace fovea
