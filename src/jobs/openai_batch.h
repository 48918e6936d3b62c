// `fovea run` over an OpenAI Batch file, as `vllm run-batch` does: input lines
//   {"custom_id", "method": "POST", "url": "/v1/chat/completions", "body": {chat completion request}}
// (images as image_url content parts: data: URLs, local paths relative to the batch file, file://, http(s):// and
// s3:// URLs downloaded ahead like the tasks format's), output lines
//   {"id": "batch_req_...", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}
// with a chat.completion body (status 200, error null) or an error body (4xx/5xx, error {code, message}). The
// request parsing and response building are the server's (openai/protocol.h). A plug-in of the one job loop
// (jobs/job_loop.h): durable and resumable like the tasks format, custom_id is the key.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "jobs/batch_job.h"

namespace fovea {

class JobItem;

struct OpenAIBatchLine {
  std::string custom_id;
  std::string key;       // custom_id as JSON (what resume compares)
  std::string method;
  std::string url;
  std::string body;      // the request body, serialised
  std::string problem;   // non-empty: the line itself is refused (e.g. nests too deep); an error record
  std::string prefetch_url;  // the body's first http(s):// or s3:// image, downloaded ahead
  std::string base_dir;  // relative image paths are taken from here (the batch file's directory)
};

// True when `line` (a parsed input line) is an OpenAI batch request: an object with custom_id, method, url, body.
bool is_openai_batch_line(const nlohmann::json& line);
// Reads one parsed line; false with *why when it has no string custom_id (it cannot get a record).
bool parse_openai_batch_line(const nlohmann::json& line, const std::string& problem, const std::string& base_dir,
                             OpenAIBatchLine* out, std::string* why);

std::unique_ptr<JobItem> make_openai_batch_item(const OpenAIBatchLine& line);

// Runs every line of an OpenAI batch file whose custom_id is not yet in `output_path`.
BatchJobSummary run_openai_batch_job(InferenceService& service, const std::string& input_path,
                                     const std::string& output_path, const BatchJobOptions& options);

}  // namespace fovea
