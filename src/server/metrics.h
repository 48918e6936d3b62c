// Throughput over a sliding window (QPM for /metrics and the batch progress line) and the Prometheus text
// exposition of EngineStats plus the server's own counters.
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>

#include "engine/engine.h"

namespace fovea {

// Events per minute over the last `window_s` seconds. Thread-safe. Times are seconds on any monotonic clock.
class RateWindow {
 public:
  explicit RateWindow(double window_s = 60.0) : window_s_(window_s) {}
  void add(double now_s, int64_t count = 1);
  // Events in the window, scaled to a minute; while less than a window has passed since the first event, the
  // elapsed time since then is the denominator (so the first minute is not underestimated).
  double per_minute(double now_s) const;

 private:
  void expire(double now_s) const;
  double window_s_;
  mutable std::mutex mutex_;
  mutable std::deque<std::pair<double, int64_t>> events_;
  double first_s_ = -1;
};

struct ServerCounters {
  std::map<int, int64_t> responses_by_status;  // HTTP status -> count
  int64_t requests_cancelled = 0;              // client went away mid-request
  int open_connections = 0;
  int active_requests = 0;
  double qpm = 0;                              // finished completions per minute (RateWindow)
  bool model_loaded = false;
};

// The Prometheus text format (version 0.0.4) of both.
std::string render_metrics(const EngineStats& stats, const ServerCounters& server);

}  // namespace fovea
