// The results JSONL of `fovea run`, written so that `kill -9` at any moment loses nothing and duplicates
// nothing: a record is appended only once its request has finished, each batch of lines goes out in one
// write() followed by fsync(), and on start a torn last line (a write cut short) is truncated away. Resuming
// skips every id already present.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>

#include "fovea/result.h"
#include <set>
#include <string>
#include <vector>

namespace fovea {

struct ExistingResults {
  std::set<std::string> done;      // keys (id.dump()) of every complete record
  std::set<std::string> failed;    // the subset whose record has an "error"
  int64_t truncated_bytes = 0;     // size of the torn tail removed
  int unreadable_lines = 0;        // complete lines that do not parse (left in place, ignored)
};

// Reads `path` if it exists, truncating a torn tail (bytes after the last '\n'). A missing file is empty.
// key_field names the record's key ("id"; "custom_id" for OpenAI batch output).
ExistingResults recover_results_file(const std::string& path, const std::string& key_field = "id");

// What a resumed job starts from: recover_results_file, after dropping the error records first when
// retry_failed; says on stderr what it dropped or ignored.
ExistingResults resume_results_file(const std::string& path, bool retry_failed, const std::string& key_field = "id");

// Rewrites `path` without its error records (through a temporary file, fsync and rename, so a kill leaves either
// the old or the new file), so that their tasks run again. Returns how many records were dropped.
int drop_failed_records(const std::string& path);

struct BatchResult {
  nlohmann::json id;
  int question_index = -1;  // a "prompts" task's question (written as "question_index"); -1 none
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<std::pair<std::string, float>> answer_logprobs;  // written as "logprobs" when non-empty
  bool has_answers = false;                                    // the task asked for answers
  std::vector<std::pair<std::string, float>> choice_logprobs;  // written as "choice_logprobs" when non-empty
  // When the task asked for "logprobs": N, per generated token {"token", "logprob", "top": [{"token",
  // "logprob"}] (N of them)}: written as "token_logprobs".
  std::vector<TokenLogprob> token_logprobs;
  int top_logprobs = -1;  // N; -1: not asked
  std::string error;
  std::string error_kind;  // with error: error_kind_name() of the failure (fovea/error_kind.h)
  double ms = 0;
};

// One JSONL line (with its '\n'), keys in the documented order: id, question_index?, text, tokens, logprobs?,
// choice_logprobs?, token_logprobs?, error?, error_kind?, ms.
std::string result_line(const BatchResult& result);

class ResultsWriter {
 public:
  explicit ResultsWriter(const std::string& path);  // opens for appending, creating the file
  ~ResultsWriter();
  ResultsWriter(const ResultsWriter&) = delete;
  ResultsWriter& operator=(const ResultsWriter&) = delete;
  // Appends the lines in one write and makes them durable (fsync). Throws fovea::Error on I/O failure.
  void append(const std::string& lines);

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace fovea
