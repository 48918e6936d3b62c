// `fovea run` over an OpenAI Batch file, as `vllm run-batch` does: input lines
//   {"custom_id", "method": "POST", "url": "/v1/chat/completions", "body": {chat completion request}}
// (images as image_url content parts: data: URLs, local paths relative to the batch file, file://, http(s)),
// output lines
//   {"id": "batch_req_...", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}
// with a chat.completion body (status 200, error null) or an error body (4xx/5xx, error {code, message}). The
// request parsing and response building are the server's (openai/protocol.h). Durable and resumable like the
// tasks format: custom_id is the key, --retry-failed runs error records again.
#pragma once
#include <string>

#include "jobs/batch_job.h"

namespace fovea {

// True when the file's first non-blank line is an OpenAI batch request (an object with custom_id and body).
bool is_openai_batch_file(const std::string& path);

struct OpenAIBatchInput {
  struct Line {
    std::string custom_id;
    std::string key;       // custom_id as JSON (what resume compares)
    std::string method;
    std::string url;
    std::string body;      // the request body, serialised
    std::string problem;   // non-empty: the line itself is refused (e.g. nests too deep); an error record
  };
  std::vector<Line> lines;
  std::vector<std::string> skipped_lines;  // not batch requests at all (no custom_id): reported, not run
  int duplicate_ids = 0;                   // later lines with a custom_id seen before are dropped
};
OpenAIBatchInput read_openai_batch(const std::string& path);

// Runs every line whose custom_id is not yet in `output_path`. options.max_tiles / tiling / concurrency /
// progress / retry_failed / max_image_bytes apply as for tasks; max_tokens comes from each body (default 256).
BatchJobSummary run_openai_batch_job(InferenceService& service, const std::string& input_path,
                                     const std::string& output_path, const BatchJobOptions& options);

}  // namespace fovea
