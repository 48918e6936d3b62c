#include "server/metrics.h"

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

#include "engine/stats_fields.h"

namespace fovea {

namespace {

class Exposition {
 public:
  void metric(const char* name, const char* type, const char* help, double value) {
    head(name, type, help);
    line(name, "", value);
  }
  void head(const char* name, const char* type, const char* help) {
    out_ += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  void line(const char* name, const std::string& labels, double value) {
    char number[64];
    std::snprintf(number, sizeof number, "%.17g", value);
    out_ += std::string(name) + (labels.empty() ? "" : "{" + labels + "}") + " " + number + "\n";
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

// A table series name "fovea_x{stage=\"vit\"}" as its metric name and its labels.
std::pair<std::string, std::string> split_series(const std::string& series) {
  const size_t brace = series.find('{');
  if (brace == std::string::npos) return {series, ""};
  return {series.substr(0, brace), series.substr(brace + 1, series.size() - brace - 2)};
}

const char* prometheus_type(StatKind kind) { return kind == StatKind::Counter ? "counter" : "gauge"; }

// Every numeric field of the EngineStats table (engine/stats_fields.h), one HELP/TYPE per metric name.
// prefix "fovea_engine_" with one stats per engine: each engine's share, labelled engine="cuda:0".
void render_engine_stats(Exposition& e, const std::vector<const EngineStats*>& engines, bool per_engine) {
  std::string last_metric;
  for (const StatField& field : engine_stats_fields()) {
    if (field.kind == StatKind::Label) continue;
    auto [metric, labels] = split_series(field.metric);
    if (per_engine) metric = "fovea_engine_" + metric.substr(std::string("fovea_").size());
    if (metric != last_metric) e.head(metric.c_str(), prometheus_type(field.kind), field.help);
    last_metric = metric;
    for (const EngineStats* s : engines) {
      std::string all_labels = per_engine ? "engine=\"" + s->engine + "\"" : "";
      if (!labels.empty()) all_labels += (all_labels.empty() ? "" : ",") + labels;
      e.line(metric.c_str(), all_labels, stat_number(field, *s) * field.metric_scale);
    }
  }
}

}  // namespace

std::string render_metrics(const EngineStats& s, const ServerCounters& server) {
  Exposition e;
  e.metric("fovea_model_loaded", "gauge", "1 once the model is loaded", server.model_loaded ? 1 : 0);
  e.head("fovea_http_responses_total", "counter", "HTTP responses by status code");
  for (const auto& [status, count] : server.responses_by_status)
    e.line("fovea_http_responses_total", "code=\"" + std::to_string(status) + "\"", double(count));
  e.metric("fovea_http_open_connections", "gauge", "open client connections", server.open_connections);
  e.metric("fovea_http_active_requests", "gauge", "HTTP requests being handled", server.active_requests);
  e.metric("fovea_requests_cancelled_total", "counter", "requests cancelled because the client went away",
           double(server.requests_cancelled));
  e.metric("fovea_qpm", "gauge", "completed requests per minute over the last minute", server.qpm);
  e.metric("fovea_kv_usage_ratio", "gauge", "fraction of KV cache blocks in use",
           s.kv_blocks_total > 0 ? double(s.kv_blocks_used) / s.kv_blocks_total : 0.0);
  render_engine_stats(e, {&s}, false);
  if (!s.engines.empty()) {
    // Behind the data-parallel dispatcher: each engine's share, and whether it still takes requests.
    std::vector<const EngineStats*> engines;
    for (const EngineStats& engine : s.engines) engines.push_back(&engine);
    e.head("fovea_engine_up", "gauge", "1 while the engine takes requests, 0 once its device failed");
    for (const EngineStats* engine : engines)
      e.line("fovea_engine_up", "engine=\"" + engine->engine + "\"", engine->failed ? 0.0 : 1.0);
    render_engine_stats(e, engines, true);
  }
  return e.take();
}

}  // namespace fovea
