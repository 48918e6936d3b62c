#include "jobs/results_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "core/error.h"

namespace fovea {

ExistingResults recover_results_file(const std::string& path, const std::string& key_field) {
  ExistingResults out;
  std::ifstream in(path, std::ios::binary);
  if (!in) return out;  // no file yet: nothing done
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  const size_t last_newline = data.rfind('\n');
  const size_t complete = last_newline == std::string::npos ? 0 : last_newline + 1;
  if (complete < data.size()) {
    // A write cut short by a kill leaves a line without its '\n'. Its request was never acknowledged as done,
    // so drop it and run that task again.
    out.truncated_bytes = int64_t(data.size() - complete);
    FOVEA_CHECK(::truncate(path.c_str(), off_t(complete)) == 0, "cannot truncate the torn last line of ", path,
                ": ", std::strerror(errno));
  }
  size_t start = 0;
  while (start < complete) {
    const size_t end = data.find('\n', start);
    const std::string line = data.substr(start, end - start);
    start = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      const auto j = nlohmann::json::parse(line);
      if (!j.is_object() || !j.contains(key_field)) throw std::runtime_error("no key");
      // An OpenAI batch record has an "id" of its own (batch_req_...); it is keyed by custom_id, never by id.
      if (key_field != "custom_id" && j.contains("custom_id")) continue;
      const std::string key = j[key_field].dump();
      out.done.insert(key);
      if (j.contains("error") && !j["error"].is_null()) out.failed.insert(key);
    } catch (const std::exception&) {
      out.unreadable_lines++;
    }
  }
  return out;
}

ExistingResults resume_results_file(const std::string& path, bool retry_failed, const std::string& key_field) {
  ExistingResults existing = recover_results_file(path, key_field);  // first: a torn tail must go before a rewrite
  if (retry_failed && !existing.failed.empty()) {
    const int dropped = drop_failed_records(path);
    std::fprintf(stderr, "resume: retrying %d failed tasks\n", dropped);
    existing = recover_results_file(path, key_field);
  }
  if (existing.truncated_bytes > 0)
    std::fprintf(stderr, "resume: dropped a torn last line (%lld bytes) from %s\n", (long long)existing.truncated_bytes,
                 path.c_str());
  if (existing.unreadable_lines > 0)
    std::fprintf(stderr, "resume: ignored %d unreadable lines in %s\n", existing.unreadable_lines, path.c_str());
  return existing;
}

int drop_failed_records(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return 0;
  std::string kept;
  std::string line;
  int dropped = 0;
  while (std::getline(in, line)) {
    bool failed = false;
    try {
      const auto j = nlohmann::json::parse(line);
      failed = j.is_object() && j.contains("error") && !j["error"].is_null();
    } catch (const std::exception&) {
      // unreadable lines are kept as they are: recover_results_file reports them
    }
    if (failed) dropped++;
    else kept += line + "\n";
  }
  in.close();
  if (dropped == 0) return 0;
  const std::string temp = path + ".tmp";
  try {
    {
      ResultsWriter out(temp);
      FOVEA_CHECK(::truncate(temp.c_str(), 0) == 0, "cannot truncate ", temp, ": ", std::strerror(errno));
      out.append(kept);
    }
    FOVEA_CHECK(std::rename(temp.c_str(), path.c_str()) == 0, "cannot replace ", path, ": ", std::strerror(errno));
  } catch (...) {
    // A full disk (or any failure) leaves the results as they were, and no half-written copy beside them.
    ::unlink(temp.c_str());
    throw;
  }
  // The rename itself is durable only once the directory is synced.
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  return dropped;
}

std::string result_line(const BatchResult& r) {
  nlohmann::ordered_json j;
  j["id"] = r.id;
  if (r.question_index >= 0) j["question_index"] = r.question_index;
  j["text"] = r.text;
  j["tokens"] = r.tokens;
  if (r.has_answers && r.error.empty()) {
    nlohmann::ordered_json lp = nlohmann::ordered_json::object();
    for (const auto& [answer, logprob] : r.answer_logprobs)
      lp[answer] = std::isfinite(logprob) ? nlohmann::ordered_json(logprob) : nlohmann::ordered_json();
    j["logprobs"] = lp;
  }
  if (!r.choice_logprobs.empty() && r.error.empty()) {
    nlohmann::ordered_json lp = nlohmann::ordered_json::object();
    for (const auto& [choice, logprob] : r.choice_logprobs) lp[choice] = logprob;
    j["choice_logprobs"] = lp;
  }
  if (r.top_logprobs >= 0 && r.error.empty()) {
    nlohmann::ordered_json positions = nlohmann::ordered_json::array();
    for (const TokenLogprob& lp : r.token_logprobs) {
      nlohmann::ordered_json top = nlohmann::ordered_json::array();
      for (size_t k = 0; k < lp.top.size() && int(k) < r.top_logprobs; ++k)
        top.push_back({{"token", lp.top[k].first}, {"logprob", lp.top[k].second}});
      positions.push_back({{"token", lp.token}, {"logprob", lp.logprob}, {"top", top}});
    }
    j["token_logprobs"] = positions;
  }
  if (!r.error.empty()) j["error"] = r.error;
  if (!r.error.empty() && !r.error_kind.empty()) j["error_kind"] = r.error_kind;
  j["ms"] = std::round(r.ms * 100.0) / 100.0;
  // Invalid UTF-8 in generated text must not make dump() throw and lose the record.
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

ResultsWriter::ResultsWriter(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  FOVEA_CHECK(fd_ >= 0, "cannot open ", path, " for appending: ", std::strerror(errno));
}

ResultsWriter::~ResultsWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void ResultsWriter::append(const std::string& lines) {
  size_t written = 0;
  while (written < lines.size()) {
    const ssize_t n = ::write(fd_, lines.data() + written, lines.size() - written);
    if (n < 0 && errno == EINTR) continue;
    FOVEA_CHECK(n > 0, "cannot write to ", path_, ": ", std::strerror(errno));
    written += size_t(n);
  }
  FOVEA_CHECK(::fsync(fd_) == 0, "cannot fsync ", path_, ": ", std::strerror(errno));
}

}  // namespace fovea
