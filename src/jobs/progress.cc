#include "jobs/progress.h"

#include <algorithm>
#include <cmath>

namespace fovea {

Progress::Progress(int64_t total, bool terminal, double line_interval_s, FILE* out)
    : total_(total), terminal_(terminal), interval_s_(line_interval_s), out_(out) {}

std::string Progress::format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = int64_t(seconds + 0.5);
  char buf[32];
  if (s < 60) std::snprintf(buf, sizeof buf, "%llds", (long long)s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%lldm%02llds", (long long)(s / 60), (long long)(s % 60));
  else std::snprintf(buf, sizeof buf, "%lldh%02lldm", (long long)(s / 3600), (long long)(s % 3600 / 60));
  return buf;
}

std::string Progress::format(int64_t done, int64_t failed, int64_t total, double qpm, bool bar) {
  std::string out;
  const double fraction = total > 0 ? double(done) / double(total) : 1.0;
  if (bar) {
    const int width = 24;
    const int filled = std::clamp(int(fraction * width), 0, width);
    out = "[" + std::string(size_t(filled), '#') + std::string(size_t(width - filled), '.') + "] ";
  }
  char buf[160];
  std::snprintf(buf, sizeof buf, "%lld/%lld %.1f%%", (long long)done, (long long)total, 100.0 * fraction);
  out += buf;
  if (failed > 0) out += " " + std::to_string(failed) + " failed";
  std::snprintf(buf, sizeof buf, " %.1f QPM", qpm);
  out += buf;
  const int64_t left = total - done;
  out += " ETA " + (left <= 0 ? std::string("0s") : qpm > 0 ? format_duration(double(left) / qpm * 60.0) : "?");
  return out;
}

void Progress::update(int64_t done, int64_t failed, double qpm, double now_s) {
  const double min_gap = terminal_ ? 0.2 : interval_s_;
  if (now_s - last_s_ < min_gap) return;
  last_s_ = now_s;
  const std::string detail = detail_.empty() ? "" : " | " + detail_;
  if (terminal_) std::fprintf(out_, "\r%s%s\033[K", format(done, failed, total_, qpm, true).c_str(), detail.c_str());
  else std::fprintf(out_, "progress: %s%s\n", format(done, failed, total_, qpm, false).c_str(), detail.c_str());
  std::fflush(out_);
}

void Progress::finish(int64_t done, int64_t failed, double elapsed_s) {
  const double qpm = elapsed_s > 0 ? double(done) * 60.0 / elapsed_s : 0.0;
  if (terminal_) std::fprintf(out_, "\r\033[K");
  std::fprintf(out_, "done: %lld/%lld tasks, %lld failed, %s, %.1f QPM%s\n", (long long)done, (long long)total_,
               (long long)failed, format_duration(elapsed_s).c_str(), qpm,
               detail_.empty() ? "" : (", " + detail_).c_str());
  std::fflush(out_);
}

std::string engine_shares(const EngineStats& stats) {
  if (stats.engines.empty()) return "";
  int64_t total = 0;
  for (const EngineStats& e : stats.engines) total += e.requests_finished;
  std::string out = "engines";
  std::string failed;
  for (const EngineStats& e : stats.engines) {
    char buf[96];
    const int64_t n = e.requests_finished;
    std::snprintf(buf, sizeof buf, " %s %.0f%%", e.engine.c_str(), total > 0 ? 100.0 * double(n) / double(total) : 0.0);
    out += buf;
    if (e.failed) failed += (failed.empty() ? "" : ", ") + e.engine;
  }
  if (!failed.empty()) out += " (" + failed + " failed)";
  return out;
}

}  // namespace fovea
