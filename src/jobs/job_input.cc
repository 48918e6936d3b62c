#include "jobs/job_input.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>

#include "core/error.h"
#include "jobs/job_loop.h"
#include "openai/protocol.h"
#include "requests/json_limits.h"

namespace fovea {
namespace {

// Calls fn(text, number) for each line of `path` ('\r\n' and a missing last '\n' accepted). A line longer than
// kMaxInputLineBytes is passed as "" with too_long set, after skipping to its end without keeping it.
template <typename Fn>
void for_each_line(const std::string& path, Fn fn) {
  // The user's own command gets these (a one-line message, exit 1), without the file:line of FOVEA_CHECK.
  const auto refuse = [&](const std::string& why) { throw Error(str("the input file ", path, " ", why)); };
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) refuse(str("cannot be opened: ", std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) refuse("is a directory (use --images DIR for a directory of images)");
  // A pipe (--input <(...)) is read as it comes; a device is no input file (/dev/zero never ends a line).
  if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) refuse("is not a regular file or a pipe");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) refuse(str("cannot be opened: ", std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  std::string line;
  bool too_long = false;
  int number = 1;
  char chunk[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) refuse(str("cannot be read: ", std::strerror(errno)));
    if (n == 0) break;
    for (const char* p = chunk; p < chunk + n;) {
      const char* end = static_cast<const char*>(std::memchr(p, '\n', size_t(chunk + n - p)));
      const char* stop = end ? end : chunk + n;
      if (!too_long) {
        line.append(p, size_t(stop - p));
        if (int64_t(line.size()) > kMaxInputLineBytes) {
          too_long = true;
          std::string().swap(line);
        }
      }
      p = stop;
      if (!end) break;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      fn(line, number++, too_long);
      line.clear();
      too_long = false;
      ++p;
    }
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (!line.empty() || too_long) fn(line, number, too_long);
}

// Every record's id must be unique: a later line whose id was used before is dropped, naming both lines.
struct IdRegistry {
  std::map<std::string, std::string> first_use;  // field + key -> where it was used first
  // False (and a message in *duplicates) when `key` of `field` was used before.
  bool claim(const std::string& field, const std::string& key, const std::string& where,
             std::vector<std::string>* duplicates) {
    const auto [it, inserted] = first_use.emplace(field + "\n" + key, where);
    if (!inserted)
      duplicates->push_back(str(where, ": ", field, " ", excerpt(key, 256), " was already used by ", it->second,
                                "; dropped"));
    return inserted;
  }
};

}  // namespace

bool parse_input_format(const std::string& name, InputFormat* out) {
  if (name == "auto") *out = InputFormat::Auto;
  else if (name == "tasks") *out = InputFormat::Tasks;
  else if (name == "openai") *out = InputFormat::OpenAI;
  else return false;
  return true;
}

JobInput read_job_input(const std::string& path, InputFormat format, const TaskDefaults& defaults) {
  JobInput input;
  const std::string parent = std::filesystem::path(path).parent_path().string();
  const std::string base_dir = parent.empty() ? "." : parent;
  const std::string absolute_dir = std::filesystem::absolute(std::filesystem::path(path)).parent_path().string();
  // A request body's own limits, one level down (the body sits inside the line): what lies deeper is never built,
  // copied or dumped (a 100k-deep body overflowed the stack there), and the line fails alone.
  const openai::ParseOptions body;
  const JsonLimits line_limits{body.max_json_depth + 1, body.max_json_elements * 2};
  IdRegistry ids;
  for_each_line(path, [&](const std::string& text, int number, bool too_long) {
    const std::string where = str("line ", number);
    if (too_long) {
      input.skipped_lines.push_back(str(where, ": longer than ", kMaxInputLineBytes, " bytes"));
      return;
    }
    if (text.find_first_not_of(" \t") == std::string::npos) return;
    nlohmann::json j;
    JsonOverLimit over = JsonOverLimit::None;
    try {
      j = parse_json_within(text, line_limits, &over);
    } catch (const std::exception&) {
      input.skipped_lines.push_back(where + ": not valid JSON");
      return;
    }
    const std::string problem =
        over == JsonOverLimit::None ? "" : "the request JSON " + json_limit_text(over, {body.max_json_depth, body.max_json_elements});
    std::string why;
    if (format == InputFormat::OpenAI || (format == InputFormat::Auto && is_openai_batch_line(j))) {
      OpenAIBatchLine line;
      if (!parse_openai_batch_line(j, problem, absolute_dir, &line, &why))
        input.skipped_lines.push_back(where + ": " + why);
      else if (ids.claim("custom_id", line.key, where, &input.duplicates))
        input.openai.push_back(std::move(line));
      return;
    }
    BatchTask task;
    if (!parse_task_json(j, problem, defaults, base_dir, &task, &why)) {
      input.skipped_lines.push_back(where + ": " + why);
      return;
    }
    std::vector<BatchTask> questions;
    expand_prompts(std::move(task), &questions);
    for (auto& question : questions) {
      const std::string use = question.question_index < 0 ? where : str(where, " (question ", question.question_index, ")");
      if (ids.claim("id", question.key, use, &input.duplicates)) input.tasks.tasks.push_back(std::move(question));
    }
  });
  input.tasks.duplicate_ids = int(input.duplicates.size());
  return input;
}

TaskList read_tasks_jsonl(const std::string& path, const TaskDefaults& defaults) {
  JobInput input = read_job_input(path, InputFormat::Tasks, defaults);
  TaskList list = std::move(input.tasks);
  list.skipped_lines = std::move(input.skipped_lines);
  return list;
}

void report_input_problems(const JobInput& input) {
  for (const auto& why : input.skipped_lines) std::fprintf(stderr, "fovea run: skipped %s\n", why.c_str());
  for (const auto& why : input.duplicates) std::fprintf(stderr, "fovea run: %s\n", why.c_str());
}

BatchJobSummary run_job_input(InferenceService& service, const JobInput& input, const std::string& output_path,
                              const BatchJobOptions& options) {
  std::vector<std::unique_ptr<JobItem>> owned;
  for (const auto& task : input.tasks.tasks) owned.push_back(make_task_item(task));
  for (const auto& line : input.openai) owned.push_back(make_openai_batch_item(line));
  std::vector<JobItem*> items;
  for (auto& item : owned) items.push_back(item.get());
  return run_job_items(service, items, output_path, options);
}

}  // namespace fovea
