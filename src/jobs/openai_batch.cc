#include "jobs/openai_batch.h"

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/error.h"
#include "core/hash.h"
#include "core/rate_window.h"
#include "jobs/progress.h"
#include "jobs/request_pump.h"
#include "media/media.h"
#include "openai/protocol.h"

namespace fovea {
namespace {

using Json = nlohmann::json;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string absolute_dir_of(const std::string& path) {
  return std::filesystem::absolute(std::filesystem::path(path)).parent_path().string();
}

// Keys in the documented order; invalid UTF-8 (a token's text, a file name) becomes U+FFFD, as the server does.
std::string dump_line(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

// A line's parse outcome, kept for its output record.
struct Parsed {
  bool ok = false;
  openai::ApiError error;  // when !ok
  int top_logprobs = 0;
  bool logprobs = false;
  std::vector<std::string> answers;  // for answer_logprobs (the request itself went to the engine)
};

// Ids derived from the custom_id, so a resumed job writes the same ones.
std::string derived_id(const std::string& prefix, const std::string& custom_id, uint32_t seed) {
  return prefix + murmur3_128(custom_id, seed).hex().substr(0, 24);
}

nlohmann::ordered_json record(const OpenAIBatchInput::Line& line, int status, const Json& body,
                              const openai::ApiError* error) {
  nlohmann::ordered_json r;
  r["id"] = derived_id("batch_req_", line.custom_id, 0);
  r["custom_id"] = line.custom_id;
  r["response"] = {{"status_code", status}, {"request_id", derived_id("req_", line.custom_id, 1)}, {"body", body}};
  if (error) {
    r["error"] = {{"code", error->code.empty() ? error->type : error->code}, {"message", error->message}};
  } else {
    r["error"] = nullptr;
  }
  return r;
}

std::string error_line(const OpenAIBatchInput::Line& line, const openai::ApiError& error) {
  return dump_line(record(line, error.status, openai::error_json(error), &error));
}

}  // namespace

bool is_openai_batch_file(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      const Json j = Json::parse(line);
      return j.is_object() && j.contains("custom_id") && j.contains("body");
    } catch (const std::exception&) {
      return false;
    }
  }
  return false;
}

OpenAIBatchInput read_openai_batch(const std::string& path) {
  std::ifstream in(path);
  FOVEA_CHECK(in, "cannot open the batch file ", path);
  OpenAIBatchInput out;
  std::set<std::string> seen;
  std::string text;
  int number = 0;
  while (std::getline(in, text)) {
    ++number;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    Json j;
    try {
      j = Json::parse(text);
    } catch (const std::exception&) {
      out.skipped_lines.push_back(str("line ", number, ": not JSON"));
      continue;
    }
    if (!j.is_object() || !j.contains("custom_id") || !j["custom_id"].is_string()) {
      out.skipped_lines.push_back(str("line ", number, ": no string custom_id"));
      continue;
    }
    OpenAIBatchInput::Line line;
    line.custom_id = j["custom_id"].get<std::string>();
    line.key = j["custom_id"].dump();
    if (!seen.insert(line.key).second) {
      out.duplicate_ids++;
      continue;
    }
    line.method = j.value("method", Json("")).is_string() ? j.value("method", "") : "";
    line.url = j.value("url", Json("")).is_string() ? j.value("url", "") : "";
    line.body = j.contains("body") ? j["body"].dump() : "";
    out.lines.push_back(std::move(line));
  }
  return out;
}

BatchJobSummary run_openai_batch_job(InferenceService& service, const std::string& input_path,
                                     const std::string& output_path, const BatchJobOptions& options) {
  BatchJobSummary summary;
  const OpenAIBatchInput input = read_openai_batch(input_path);
  for (const auto& why : input.skipped_lines) std::fprintf(stderr, "fovea run: skipped %s\n", why.c_str());
  if (input.duplicate_ids > 0)
    std::fprintf(stderr, "fovea run: dropped %d lines whose custom_id appeared earlier\n", input.duplicate_ids);
  const ExistingResults existing = resume_results_file(output_path, options.retry_failed, "custom_id");
  std::vector<const OpenAIBatchInput::Line*> todo;
  for (const auto& line : input.lines) {
    if (existing.done.count(line.key)) {
      summary.already_done++;
      summary.earlier_failed += existing.failed.count(line.key);
    } else {
      todo.push_back(&line);
    }
  }
  summary.total = int64_t(input.lines.size());
  if (summary.already_done > 0)
    std::fprintf(stderr, "resume: %lld of %lld requests already in %s\n", (long long)summary.already_done,
                 (long long)summary.total, output_path.c_str());

  openai::ParseOptions parse;
  parse.tiling = options.tiling;
  parse.max_tiles = options.max_tiles;
  // The batch file is the user's own: local paths anywhere (relative ones from the file's directory), remote
  // URLs too; the size limit still applies.
  MediaOptions media;
  media.allowed_media_dir = "/";
  media.allow_remote = true;
  media.max_bytes = options.max_image_bytes;
  const std::string base_dir = absolute_dir_of(input_path);
  const openai::MediaLoader loader = [&](const std::string& url) {
    const bool plain_relative = !url.empty() && url[0] != '/' && url.find("://") == std::string::npos &&
                                url.rfind("data:", 0) != 0;
    return load_image_url(plain_relative ? base_dir + "/" + url : url, media);
  };
  const std::string model = service.model_name();
  const openai::TokenText token_text = [&service](int32_t t) { return service.token_text(t); };
  std::vector<Parsed> parsed(todo.size());

  ResultsWriter writer(output_path);
  Progress progress(int64_t(todo.size()), options.progress_terminal, options.progress_interval_s);
  RateWindow rate(60.0);
  const double start = now_seconds();

  PumpCallbacks callbacks;
  callbacks.make_request = [&](size_t i, Request* request, std::string* error) {
    const OpenAIBatchInput::Line& line = *todo[i];
    Parsed& p = parsed[i];
    openai::ChatRequest chat;
    if (line.url != "/v1/chat/completions") {
      p.error.status = 400;
      p.error.message = "url '" + line.url + "' is not supported (only /v1/chat/completions)";
      p.error.param = "url";
    } else if (line.method != "POST" && line.method != "post") {
      p.error.status = 400;
      p.error.message = "method '" + line.method + "' is not supported (POST)";
      p.error.param = "method";
    } else if (openai::parse_chat_request(line.body, parse, loader, &chat, &p.error)) {
      p.ok = true;
      p.logprobs = chat.logprobs;
      p.top_logprobs = chat.top_logprobs;
      p.answers = chat.request.params.answers;
      *request = std::move(chat.request);
      return true;
    }
    *error = p.error.message;
    return false;
  };
  callbacks.on_finished = [&](std::vector<FinishedRequest>& finished) {
    std::string lines;
    for (const auto& f : finished) {
      const OpenAIBatchInput::Line& line = *todo[f.index];
      const Parsed& p = parsed[f.index];
      if (!p.ok) {
        lines += error_line(line, p.error);
      } else if (!f.final.error.empty() || f.final.finish_reason == "error") {
        RequestEvent ev = f.final;
        if (ev.error.empty()) ev.error = "failed";
        lines += error_line(line, openai::engine_error(ev));
      } else {
        const openai::Completion c{derived_id("chatcmpl-", line.custom_id, 2), int64_t(std::time(nullptr)), model};
        const Json logprobs = p.logprobs ? openai::logprob_content(f.logprobs, p.top_logprobs, token_text) : Json();
        Json body = openai::completion_json(c, f.text, openai::finish_reason_for(f.final.finish_reason), logprobs,
                                            f.final.prompt_tokens, f.final.completion_tokens);
        openai::add_scores(&body["choices"][0], p.answers, f.final);  // as the server's reply has them
        lines += dump_line(record(line, 200, body, nullptr));
        continue;
      }
      summary.failed++;
    }
    writer.append(lines);  // durable before it counts as done
    summary.ran += int64_t(finished.size());
    rate.add(now_seconds(), int64_t(finished.size()));
  };
  callbacks.on_tick = [&] {
    if (!options.progress) return;
    progress.set_detail(engine_shares(service.stats()));
    progress.update(summary.ran, summary.failed, rate.per_minute(now_seconds()), now_seconds());
  };
  pump_requests(service, todo.size(), options.concurrency, callbacks);
  summary.elapsed_s = now_seconds() - start;
  if (options.progress) progress.finish(summary.ran, summary.failed, summary.elapsed_s);
  return summary;
}

}  // namespace fovea
