#include "jobs/openai_batch.h"

#include <ctime>

#include "core/error.h"
#include "core/hash.h"
#include "jobs/chat_messages.h"
#include "jobs/job_input.h"
#include "jobs/job_loop.h"
#include "openai/protocol.h"

namespace fovea {
namespace {

using Json = nlohmann::json;

// Keys in the documented order; invalid UTF-8 (a token's text, a file name) becomes U+FFFD, as the server does.
std::string dump_line(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

// Ids derived from the custom_id, so a resumed job writes the same ones.
std::string derived_id(const std::string& prefix, const std::string& custom_id, uint32_t seed) {
  return prefix + murmur3_128(custom_id, seed).hex().substr(0, 24);
}

openai::ApiError bad_line(const std::string& message, const std::string& param = "") {
  openai::ApiError error;
  error.status = 400;
  error.message = message;
  error.param = param;
  return error;
}

// The OpenAI batch format's plug-in: one line in, one batch output record out.
class OpenAIBatchItem final : public JobItem {
 public:
  explicit OpenAIBatchItem(const OpenAIBatchLine& line) : line_(line) {}
  const char* key_field() const override { return "custom_id"; }
  const std::string& key() const override { return line_.key; }
  std::string prefetch_url() const override { return line_.prefetch_url; }

  bool make_request(const JobContext& context, Request* request, std::string* error) override {
    ok_ = false;
    openai::ChatRequest chat;
    if (!line_.problem.empty()) {
      error_ = bad_line(line_.problem);
    } else if (line_.url != "/v1/chat/completions") {
      error_ = bad_line("url '" + excerpt(line_.url) + "' is not supported (only /v1/chat/completions)", "url");
    } else if (line_.method != "POST" && line_.method != "post") {
      error_ = bad_line("method '" + excerpt(line_.method) + "' is not supported (POST)", "method");
    } else {
      openai::ParseOptions parse;
      parse.tiling = context.options.tiling;
      parse.max_tiles = context.options.max_tiles;
      ok_ = openai::parse_chat_request(line_.body, parse, loader(context), &chat, &error_);
    }
    if (!ok_) {
      *error = error_.message;
      return false;
    }
    logprobs_ = chat.logprobs;
    top_logprobs_ = chat.top_logprobs;
    answers_ = chat.request.params.answers;
    *request = std::move(chat.request);
    return true;
  }

  Record render(const JobContext& context, const FinishedRequest& f) const override {
    if (!ok_) return {dump_line(record(error_.status, openai::error_json(error_), &error_)), true, ""};
    if (!f.final.error.empty() || f.final.finish_reason == "error") {
      RequestEvent ev = f.final;
      if (ev.error.empty()) ev.error = "failed";
      const openai::ApiError error = openai::engine_error(ev);
      return {dump_line(record(error.status, openai::error_json(error), &error)), true, ""};
    }
    InferenceService& service = context.service;
    const openai::Completion c{derived_id("chatcmpl-", line_.custom_id, 2), int64_t(std::time(nullptr)),
                               service.model_name()};
    const openai::TokenText token_text = [&service](int32_t t) { return service.token_text(t); };
    const Json logprobs = logprobs_ ? openai::logprob_content(f.logprobs, top_logprobs_, token_text) : Json();
    Json body = openai::completion_json(c, f.text, openai::finish_reason_for(f.final.finish_reason), logprobs,
                                        f.final.prompt_tokens, f.final.completion_tokens);
    // As the server answers: choice_logprobs (guided_choice/choices) and answer_logprobs (answers).
    openai::add_scores(&body["choices"][0], answers_, f.final);
    return {dump_line(record(200, body, nullptr)), false, ""};
  }

 private:
  // Images as the tasks format reads them (jobs/chat_messages.h); relative paths from the batch file's directory.
  openai::MediaLoader loader(const JobContext& context) const {
    return job_image_loader(context, line_.prefetch_url,
                            [this](const std::string& path) { return line_.base_dir + "/" + path; });
  }

  nlohmann::ordered_json record(int status, const Json& body, const openai::ApiError* error) const {
    nlohmann::ordered_json r;
    r["id"] = derived_id("batch_req_", line_.custom_id, 0);
    r["custom_id"] = line_.custom_id;
    r["response"] = {{"status_code", status}, {"request_id", derived_id("req_", line_.custom_id, 1)}, {"body", body}};
    if (error) {
      r["error"] = {{"code", error->code.empty() ? error->type : error->code},
                    {"message", client_error_text(error->message)}};
    } else {
      r["error"] = nullptr;
    }
    return r;
  }

  const OpenAIBatchLine& line_;
  bool ok_ = false;
  openai::ApiError error_;
  bool logprobs_ = false;
  int top_logprobs_ = 0;
  std::vector<std::string> answers_;  // for answer_logprobs (the request itself went to the engine)
};

}  // namespace

bool is_openai_batch_line(const Json& line) {
  return line.is_object() && line.contains("custom_id") && line.contains("method") && line.contains("url") &&
         line.contains("body");
}

bool parse_openai_batch_line(const Json& j, const std::string& problem, const std::string& base_dir,
                             OpenAIBatchLine* out, std::string* why) {
  if (!j.is_object() || !j.contains("custom_id") || !j["custom_id"].is_string()) {
    *why = "no string \"custom_id\"";
    return false;
  }
  *out = OpenAIBatchLine{};
  out->custom_id = j["custom_id"].get<std::string>();
  out->key = j["custom_id"].dump();
  out->base_dir = base_dir;
  out->problem = problem;
  const auto text = [&](const char* key) { return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : ""; };
  out->method = text("method");
  out->url = text("url");
  if (!out->problem.empty()) return true;  // past a limit: the body is incomplete, never run or copied
  if (!j.contains("body")) {
    out->problem = "the line has no \"body\"";
    return true;
  }
  out->body = j["body"].dump();
  const Json& body = j["body"];
  out->prefetch_url = body.is_object() && body.contains("messages") ? first_remote_image(body["messages"]) : "";
  return true;
}

std::unique_ptr<JobItem> make_openai_batch_item(const OpenAIBatchLine& line) {
  return std::make_unique<OpenAIBatchItem>(line);
}

BatchJobSummary run_openai_batch_job(InferenceService& service, const std::string& input_path,
                                     const std::string& output_path, const BatchJobOptions& options) {
  const JobInput input = read_job_input(input_path, InputFormat::OpenAI, {});
  report_input_problems(input);
  return run_job_input(service, input, output_path, options);
}

}  // namespace fovea
