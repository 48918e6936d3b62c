// The Prometheus text exposition of EngineStats plus the server's own counters.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "core/rate_window.h"
#include "fovea/engine.h"

namespace fovea {

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
