#include "jobs/batch_tasks.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "fetch/fetch.h"
#include "requests/json_limits.h"
#include "requests/request_fields.h"

namespace fovea {
namespace fs = std::filesystem;

std::string resolve_task_image(const std::string& image, const std::string& base_dir) {
  if (image.empty() || image[0] == '/' || base_dir.empty() || is_fetch_url(image) || image.rfind("data:", 0) == 0)
    return image;  // URLs as given
  const fs::path beside_tasks = fs::path(base_dir) / image;
  std::error_code ec;
  if (fs::exists(beside_tasks, ec) || !fs::exists(image, ec)) return beside_tasks.string();
  return image;
}

namespace {

// Reads an array of non-empty strings; false when `value` is not one.
bool string_list(const nlohmann::json& value, std::vector<std::string>* out) {
  out->clear();
  if (!value.is_array()) return false;
  for (const auto& item : value) {
    if (!item.is_string() || item.get<std::string>().empty()) {
      out->clear();
      return false;
    }
    out->push_back(item.get<std::string>());
  }
  return true;
}

// "messages" instead of an image and a prompt: kept as JSON text for the OpenAI parser, which reads it when the
// task runs (its images are loaded then); "system" becomes the first message.
void read_messages(const nlohmann::json& j, const std::string& base_dir, BatchTask* task) {
  for (const char* other : {"image", "prompt", "prompts"})
    if (j.contains(other) && !j[other].is_null()) {
      task->problem = str("give \"messages\" or \"", other, "\", not both (images and the prompt go in the messages)");
      return;
    }
  const nlohmann::json& messages = j["messages"];
  if (!messages.is_array() || messages.empty()) {
    task->problem = "\"messages\" must be a non-empty array of chat messages";
    return;
  }
  nlohmann::json all = nlohmann::json::array();
  if (!task->system.empty()) all.push_back({{"role", "system"}, {"content", task->system}});
  all.insert(all.end(), messages.begin(), messages.end());
  task->messages = all.dump();
  task->base_dir = base_dir;
  task->system.clear();
  task->prompt.clear();  // --prompt is for lines without one
}

}  // namespace

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    const size_t b = item.find_first_not_of(" \t");
    const size_t e = item.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(item.substr(b, e - b + 1));
    start = end + 1;
  }
  return out;
}

void expand_prompts(BatchTask task, std::vector<BatchTask>* out) {
  if (task.prompts.empty()) {
    out->push_back(std::move(task));
    return;
  }
  const std::string base = task.id.is_string() ? task.id.get<std::string>() : task.id.dump();
  std::vector<std::string> prompts = std::move(task.prompts);
  task.prompts.clear();
  for (size_t k = 0; k < prompts.size(); ++k) {
    BatchTask question = task;
    question.id = base + "#" + std::to_string(k);
    question.key = question.id.dump();
    question.question_index = int(k);
    question.prompt = std::move(prompts[k]);
    out->push_back(std::move(question));
  }
}

bool parse_task_line(const std::string& line, const TaskDefaults& defaults, const std::string& base_dir,
                     BatchTask* task, std::string* why) {
  // The limits of a request body (openai::ParseOptions): a deep nest is dropped while parsing instead of being
  // built, and the task then fails with its own record.
  const JsonLimits limits;
  JsonOverLimit over = JsonOverLimit::None;
  nlohmann::json j;
  try {
    j = parse_json_within(line, limits, &over);
  } catch (const std::exception&) {
    *why = "not valid JSON";
    return false;
  }
  return parse_task_json(j, over == JsonOverLimit::None ? "" : "the task's JSON " + json_limit_text(over, limits),
                         defaults, base_dir, task, why);
}

bool parse_task_json(const nlohmann::json& j, const std::string& problem, const TaskDefaults& defaults,
                     const std::string& base_dir, BatchTask* task, std::string* why) {
  if (!j.is_object() || !j.contains("id") || !(j["id"].is_string() || j["id"].is_number_integer())) {
    *why = "no \"id\" (string or integer)";
    return false;
  }
  *task = BatchTask{};
  task->id = j["id"];
  task->key = task->id.dump();
  task->prompt = defaults.prompt;
  task->max_tokens = defaults.max_tokens;
  task->answers = defaults.answers;
  // Anything wrong past the id fails this task alone (an error record), so the job goes on.
  const auto image = j.find("image");  // absent or null: a text-only task
  if (image != j.end() && !image->is_null()) {
    if (!image->is_string() || image->get<std::string>().empty())
      task->problem = "\"image\" must be a non-empty path (or absent, for a text-only task)";
    else
      task->image_path = resolve_task_image(image->get<std::string>(), base_dir);
  }
  if (j.contains("system") && !j["system"].is_null()) {
    if (j["system"].is_string()) task->system = j["system"].get<std::string>();
    else task->problem = "\"system\" must be a string";
  }
  if (j.contains("prompt")) {
    if (j["prompt"].is_string()) task->prompt = j["prompt"].get<std::string>();
    else task->problem = "\"prompt\" must be a string";
  }
  if (j.contains("max_tokens") && !j["max_tokens"].is_null()) {
    if (j["max_tokens"].is_number_integer() && j["max_tokens"].get<int64_t>() >= 1 &&
        j["max_tokens"].get<int64_t>() <= 1 << 20)
      task->max_tokens = j["max_tokens"].get<int>();
    else
      task->problem = "\"max_tokens\" must be a positive integer";
  }
  if (j.contains("prompts") && !j["prompts"].is_null()) {
    if (j.contains("prompt")) task->problem = "give \"prompt\" or \"prompts\", not both";
    else if (!string_list(j["prompts"], &task->prompts) || task->prompts.empty())
      task->problem = "\"prompts\" must be a non-empty array of non-empty strings";
    else task->prompt = task->prompts.front();
  }
  if (j.contains("messages") && !j["messages"].is_null()) read_messages(j, base_dir, task);
  // The fields every JSON door reads by the same rules (requests/request_fields.h).
  Request fields;
  fields.params.answers = task->answers;
  fields.max_tiles = 0;
  FieldError refused;
  if (read_sampling_fields(j, &task->sampling, &refused) && read_fovea_fields(j, &fields, &refused)) {
    task->answers = std::move(fields.params.answers);
    task->choices = std::move(fields.params.choices);
    task->max_tiles = fields.max_tiles;
    if (j.contains("tiling") && !j["tiling"].is_null()) task->tiling = fields.tiling;
  } else {
    task->problem = refused.message;
  }
  // As Python's Request.logprobs: the chosen token's log-prob and N alternatives per generated token.
  bool present = false;
  int64_t n = 0;
  if (!read_int_field(j, "logprobs", 0, 20, &n, &present, &refused)) task->problem = refused.message;
  if (present) task->logprobs = int(n);
  if (!problem.empty()) task->problem = problem;
  if (task->prompt.empty() && task->messages.empty() && task->problem.empty()) task->problem = "task has no prompt (and no --prompt given)";
  return true;
}

TaskList tasks_from_image_dir(const std::string& dir, const TaskDefaults& defaults) {
  std::error_code ec;
  FOVEA_CHECK(fs::is_directory(dir, ec), "not a directory: ", dir);
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name[0] == '.' || !entry.is_regular_file(ec)) continue;
    names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  TaskList list;
  for (const auto& name : names) {
    BatchTask t;
    t.id = name;
    t.key = t.id.dump();
    t.image_path = (fs::path(dir) / name).string();
    t.prompt = defaults.prompt;
    t.max_tokens = defaults.max_tokens;
    t.answers = defaults.answers;
    if (t.prompt.empty()) t.problem = "no --prompt given";
    list.tasks.push_back(std::move(t));
  }
  return list;
}

}  // namespace fovea
