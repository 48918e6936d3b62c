#include "server/metrics.h"

#include <algorithm>
#include <cstdio>

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

// Behind the data-parallel dispatcher: each engine's share, one series per engine="cuda:0" label.
void render_engine_shares(Exposition& e, const EngineStats& s) {
  if (s.engines.empty()) return;
  struct Series {
    const char* name;
    const char* type;
    const char* help;
    double (*value)(const EngineStats&);
  };
  const Series series[] = {
      {"fovea_engine_up", "gauge", "1 while the engine takes requests, 0 once its device failed",
       [](const EngineStats& x) { return x.failed ? 0.0 : 1.0; }},
      {"fovea_engine_requests_finished_total", "counter", "requests each engine finished",
       [](const EngineStats& x) { return double(x.requests_finished); }},
      {"fovea_engine_requests_failed_total", "counter", "requests that ended in an error, per engine",
       [](const EngineStats& x) { return double(x.requests_failed); }},
      {"fovea_engine_completion_tokens_total", "counter", "tokens generated, per engine",
       [](const EngineStats& x) { return double(x.completion_tokens); }},
      {"fovea_engine_queue_depth", "gauge", "requests waiting to be scheduled, per engine",
       [](const EngineStats& x) { return double(x.queue_depth); }},
      {"fovea_engine_running_requests", "gauge", "requests being scheduled or generated, per engine",
       [](const EngineStats& x) { return double(x.running); }},
      {"fovea_engine_kv_blocks_used", "gauge", "KV cache blocks in use, per engine",
       [](const EngineStats& x) { return double(x.kv_blocks_used); }},
      {"fovea_engine_vision_cache_hits_total", "counter", "images served from the vision cache, per engine",
       [](const EngineStats& x) { return double(x.vision_cache_hits); }},
  };
  for (const Series& m : series) {
    e.head(m.name, m.type, m.help);
    for (const EngineStats& engine : s.engines) e.line(m.name, "engine=\"" + engine.engine + "\"", m.value(engine));
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
  e.metric("fovea_requests_submitted_total", "counter", "requests submitted to the engine", double(s.requests_submitted));
  e.metric("fovea_requests_finished_total", "counter", "requests the engine finished", double(s.requests_finished));
  e.metric("fovea_requests_failed_total", "counter", "requests that ended in an error", double(s.requests_failed));
  e.metric("fovea_prompt_tokens_total", "counter", "prompt tokens processed", double(s.prompt_tokens));
  e.metric("fovea_completion_tokens_total", "counter", "tokens generated", double(s.completion_tokens));
  e.metric("fovea_queue_depth", "gauge", "requests waiting to be scheduled", s.queue_depth);
  e.metric("fovea_running_requests", "gauge", "requests being scheduled or generated", s.running);
  e.metric("fovea_qpm", "gauge", "completed requests per minute over the last minute", server.qpm);
  e.metric("fovea_prefix_cache_hit_tokens_total", "counter", "prompt tokens served from the prefix cache",
           double(s.prefix_cache_hit_tokens));
  e.metric("fovea_prefill_tokens_total", "counter", "prompt tokens whose KV was computed", double(s.prefill_tokens));
  e.metric("fovea_inflight_prefix_waits_total", "counter",
           "requests that waited for a prefix another request was computing", double(s.inflight_prefix_waits));
  e.metric("fovea_vision_cache_hits_total", "counter", "images whose embeddings came from the vision cache",
           double(s.vision_cache_hits));
  e.metric("fovea_vision_cache_misses_total", "counter", "images encoded by the vision model",
           double(s.vision_cache_misses));
  e.metric("fovea_kv_blocks_total", "gauge", "KV cache blocks in the pool", s.kv_blocks_total);
  e.metric("fovea_kv_blocks_used", "gauge", "KV cache blocks in use", s.kv_blocks_used);
  e.metric("fovea_kv_usage_ratio", "gauge", "fraction of KV cache blocks in use",
           s.kv_blocks_total > 0 ? double(s.kv_blocks_used) / s.kv_blocks_total : 0.0);
  e.head("fovea_stage_seconds_total", "counter", "cumulative time per pipeline stage");
  e.line("fovea_stage_seconds_total", "stage=\"preprocess\"", s.preprocess_ms / 1000.0);
  e.line("fovea_stage_seconds_total", "stage=\"vit\"", s.vit_ms / 1000.0);
  e.line("fovea_stage_seconds_total", "stage=\"llm\"", s.llm_ms / 1000.0);
  render_engine_shares(e, s);
  return e.take();
}

}  // namespace fovea
