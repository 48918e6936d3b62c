#include "engine/stats_json.h"

namespace fovea {

nlohmann::ordered_json stats_json(const EngineStats& s) {
  nlohmann::ordered_json j;
  j["requests_submitted"] = s.requests_submitted;
  j["requests_finished"] = s.requests_finished;
  j["requests_failed"] = s.requests_failed;
  j["prompt_tokens"] = s.prompt_tokens;
  j["completion_tokens"] = s.completion_tokens;
  j["prefix_cache_hit_tokens"] = s.prefix_cache_hit_tokens;
  j["prefill_tokens"] = s.prefill_tokens;
  j["inflight_prefix_waits"] = s.inflight_prefix_waits;
  j["inflight_prefix_hit_tokens"] = s.inflight_prefix_hit_tokens;
  j["vision_cache_hits"] = s.vision_cache_hits;
  j["vision_cache_misses"] = s.vision_cache_misses;
  j["queue_depth"] = s.queue_depth;
  j["running"] = s.running;
  j["kv_blocks_total"] = s.kv_blocks_total;
  j["kv_blocks_used"] = s.kv_blocks_used;
  j["preprocess_ms"] = s.preprocess_ms;
  j["vit_ms"] = s.vit_ms;
  j["llm_ms"] = s.llm_ms;
  j["engine"] = s.engine;
  j["failed"] = s.failed;
  j["failure"] = s.failure;
  nlohmann::ordered_json engines = nlohmann::ordered_json::array();
  for (const EngineStats& e : s.engines) engines.push_back(stats_json(e));
  j["engines"] = engines;
  return j;
}

}  // namespace fovea
