// The tasks of `fovea run`: a JSONL file ({"id", "image"?, "prompt", "system"?, "max_tokens"?, "answers"?,
// "choices"?, "logprobs"?, "tiling"?, "max_tiles"?, sampling fields?} per line; no "image": a text-only task;
// "image" a path, an http(s):// / s3:// URL or a data: URL; the sampling fields and Fovea's are read by the rules
// every door shares, requests/request_fields.h) or a directory of images (one task per file, id = file name)
// with one prompt for all. A line with "prompts": [...] instead of "prompt" asks several questions about its
// image: one task per question, with id "<id>#<k>" (k from 0, the id's text for a number) and question_index k,
// which the job runs together so the image's prefix is shared. Ids are unique: a line whose id (its own or a
// generated one) was used before is dropped, naming both lines (jobs/job_input.h).
// A line with "messages" (OpenAI chat messages: system and user messages, text and image_url parts; the image
// URLs as "image" takes them, relative paths beside the tasks file) instead of "image" + "prompt"/"prompts" is
// read by the OpenAI parser (jobs/chat_messages.h); its "system", if any, goes first as a system message (as
// Python's Request(messages=..., system=...)). A line with "messages" and "image", "prompt" or "prompts" fails.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "fovea/request.h"

namespace fovea {

struct TaskDefaults {
  std::string prompt;                // used when a task has no "prompt"
  int max_tokens = 1;                // used when a task has no "max_tokens"
  std::vector<std::string> answers;  // used when a task has no "answers"
};

struct BatchTask {
  nlohmann::json id;        // as given (string or number); written back unchanged
  std::string key;          // id.dump(): what resume compares
  std::string image_path;   // resolved, or an http(s):// / s3:// / data: URL as given; empty: a text-only task
  std::string prompt;
  std::string system;       // empty: the chat template's default system text
  std::string messages;     // "messages" as JSON text ("system" prepended); non-empty: image/prompt/system unused
  std::string base_dir;     // the tasks file's directory: relative image paths of "messages" resolve from here
  int max_tokens = 1;
  std::vector<std::string> answers;
  std::vector<std::string> choices;  // "choices": the answer is the most likely one (GenerationParams::choices)
  std::vector<std::string> prompts;  // "prompts" as parsed; expand_prompts makes them tasks
  int question_index = -1;           // k of a task made from "prompts" (written as "question_index"); -1 none
  GenerationParams sampling;  // the sampling fields (temperature, top_p, top_k, seed, stop, penalties, ...)
  int logprobs = -1;          // "logprobs": N alternatives per generated token (-1: no per-token log-probs)
  std::optional<TilingPolicy> tiling;  // "tiling"; none: the run's --policy
  int max_tiles = 0;                   // "max_tiles"; 0: the run's --max-tiles
  std::string problem;      // non-empty: the task itself is invalid; it becomes an error record
};

struct TaskList {
  std::vector<BatchTask> tasks;
  std::vector<std::string> skipped_lines;  // lines that are not tasks at all (no id): reported, not run
  int duplicate_ids = 0;                   // later tasks with an id used before are dropped
};

// Image paths that are relative are resolved against the tasks file's directory, falling back to the current
// directory when the file is not there. Every line is read as a task (read_job_input with InputFormat::Tasks,
// jobs/job_input.cc, which defines this).
TaskList read_tasks_jsonl(const std::string& path, const TaskDefaults& defaults);
// Regular files of `dir` (hidden ones skipped), sorted by name.
TaskList tasks_from_image_dir(const std::string& dir, const TaskDefaults& defaults);
// Parses one line; false (with *why) when the line has no usable id.
bool parse_task_line(const std::string& line, const TaskDefaults& defaults, const std::string& base_dir,
                     BatchTask* task, std::string* why);
// The same from the line's JSON; a non-empty `problem` (the line passed a parse limit) fails the task.
bool parse_task_json(const nlohmann::json& j, const std::string& problem, const TaskDefaults& defaults,
                     const std::string& base_dir, BatchTask* task, std::string* why);
// One task per question of a "prompts" task (ids "<id>#<k>", question_index k); any other task as it is.
void expand_prompts(BatchTask task, std::vector<BatchTask>* out);

// A task's image as given: a relative path is taken beside the tasks file (`base_dir`), or from the current
// directory when it is not there but here; absolute paths and URLs stay as they are.
std::string resolve_task_image(const std::string& image, const std::string& base_dir);

// "a,b , c" -> {"a", "b", "c"} (empty entries dropped).
std::vector<std::string> split_list(const std::string& text);

}  // namespace fovea
