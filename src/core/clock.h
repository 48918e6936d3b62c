// Seconds on the steady (monotonic) clock: what every rate, deadline and benchmark timer in the host core reads.
#pragma once
#include <chrono>

namespace fovea {

inline double monotonic_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace fovea
