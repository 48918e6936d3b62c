#include "core/rate_window.h"

#include <algorithm>

namespace fovea {

void RateWindow::add(double now_s, int64_t count) {
  std::lock_guard lock(mutex_);
  if (first_s_ < 0) first_s_ = now_s;
  events_.emplace_back(now_s, count);
  expire(now_s);
}

void RateWindow::expire(double now_s) const {
  while (!events_.empty() && events_.front().first < now_s - window_s_) events_.pop_front();
}

double RateWindow::per_minute(double now_s) const {
  std::lock_guard lock(mutex_);
  if (first_s_ < 0) return 0.0;
  expire(now_s);
  int64_t total = 0;
  for (const auto& e : events_) total += e.second;
  // At least one second of span, so a burst at start-up does not read as an absurd rate.
  const double span = std::max(1.0, std::min(window_s_, now_s - first_s_));
  return double(total) * 60.0 / span;
}

}  // namespace fovea
