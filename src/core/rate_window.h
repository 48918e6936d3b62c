// Throughput over a sliding window: QPM for /metrics and the batch progress line.
#pragma once
#include <cstdint>
#include <deque>
#include <mutex>
#include <utility>

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

}  // namespace fovea
