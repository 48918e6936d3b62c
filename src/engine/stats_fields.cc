#include "engine/stats_fields.h"

#include <type_traits>

namespace fovea {

const std::vector<StatField>& engine_stats_fields() {
  using K = StatKind;
  static const std::vector<StatField> fields = {
      {"requests_submitted", &EngineStats::requests_submitted, K::Counter, "requests submitted to the engine",
       "fovea_requests_submitted_total"},
      {"requests_finished", &EngineStats::requests_finished, K::Counter, "requests the engine finished",
       "fovea_requests_finished_total"},
      {"requests_failed", &EngineStats::requests_failed, K::Counter, "requests that ended in an error",
       "fovea_requests_failed_total"},
      {"prompt_tokens", &EngineStats::prompt_tokens, K::Counter, "prompt tokens processed",
       "fovea_prompt_tokens_total"},
      {"completion_tokens", &EngineStats::completion_tokens, K::Counter, "tokens generated",
       "fovea_completion_tokens_total"},
      {"prefix_cache_hit_tokens", &EngineStats::prefix_cache_hit_tokens, K::Counter,
       "prompt tokens whose KV was reused from the prefix cache", "fovea_prefix_cache_hit_tokens_total"},
      {"prefill_tokens", &EngineStats::prefill_tokens, K::Counter, "prompt tokens whose KV was computed",
       "fovea_prefill_tokens_total"},
      {"inflight_prefix_waits", &EngineStats::inflight_prefix_waits, K::Counter,
       "requests that waited for a prefix another request was computing", "fovea_inflight_prefix_waits_total"},
      {"inflight_prefix_hit_tokens", &EngineStats::inflight_prefix_hit_tokens, K::Counter,
       "prompt tokens those waiting requests then reused", "fovea_inflight_prefix_hit_tokens_total"},
      {"vision_cache_hits", &EngineStats::vision_cache_hits, K::Counter,
       "images whose embeddings came from the vision cache", "fovea_vision_cache_hits_total"},
      {"vision_cache_misses", &EngineStats::vision_cache_misses, K::Counter, "images encoded by the vision model",
       "fovea_vision_cache_misses_total"},
      {"queue_depth", &EngineStats::queue_depth, K::Gauge, "requests waiting to be scheduled", "fovea_queue_depth"},
      {"running", &EngineStats::running, K::Gauge, "requests being scheduled or generated",
       "fovea_running_requests"},
      {"kv_blocks_total", &EngineStats::kv_blocks_total, K::Gauge, "KV cache blocks in the pool",
       "fovea_kv_blocks_total"},
      {"kv_blocks_used", &EngineStats::kv_blocks_used, K::Gauge, "KV cache blocks in use", "fovea_kv_blocks_used"},
      {"preprocess_ms", &EngineStats::preprocess_ms, K::Counter,
       "cumulative time per pipeline stage: preprocessing (decode, tile, tokenise); ms (seconds in /metrics)",
       "fovea_stage_seconds_total{stage=\"preprocess\"}", 1e-3},
      {"vit_ms", &EngineStats::vit_ms, K::Counter, "cumulative time in the vision model; ms (seconds in /metrics)",
       "fovea_stage_seconds_total{stage=\"vit\"}", 1e-3},
      {"llm_ms", &EngineStats::llm_ms, K::Counter, "cumulative time in the language model; ms (seconds in /metrics)",
       "fovea_stage_seconds_total{stage=\"llm\"}", 1e-3},
      {"engine", &EngineStats::engine, K::Label, "which engine: \"cuda:1\", \"cpu#0\" (\"\" for a lone engine)", ""},
      {"failed", &EngineStats::failed, K::Health,
       "1 once the engine's device failed and it takes no more requests (behind a dispatcher: every engine's)",
       "fovea_failed"},
      {"failure", &EngineStats::failure, K::Label, "why it failed", ""},
  };
  return fields;
}

double stat_number(const StatField& field, const EngineStats& stats) {
  return std::visit(
      [&](auto member) -> double {
        using Value = std::remove_cvref_t<decltype(stats.*member)>;
        if constexpr (std::is_same_v<Value, std::string>) return 0.0;
        else return double(stats.*member);
      },
      field.member);
}

namespace {

// Applies op(total.*m, part.*m) to every Counter and Gauge field (`counters_only`: Counters alone).
template <typename Op>
void each_number(EngineStats& total, const EngineStats& part, bool counters_only, Op op) {
  for (const StatField& field : engine_stats_fields()) {
    const bool summed = field.kind == StatKind::Counter || (field.kind == StatKind::Gauge && !counters_only);
    if (!summed) continue;
    std::visit(
        [&](auto member) {
          using Value = std::remove_cvref_t<decltype(total.*member)>;
          if constexpr (std::is_arithmetic_v<Value> && !std::is_same_v<Value, bool>)
            total.*member = op(total.*member, part.*member);
        },
        field.member);
  }
}

}  // namespace

void add_stats(EngineStats& total, const EngineStats& part) {
  each_number(total, part, false, [](auto a, auto b) { return a + b; });
}

EngineStats stats_delta(const EngineStats& after, const EngineStats& before) {
  EngineStats delta = after;
  each_number(delta, before, true, [](auto a, auto b) { return a - b; });
  for (size_t i = 0; i < delta.engines.size() && i < before.engines.size(); ++i)
    delta.engines[i] = stats_delta(after.engines[i], before.engines[i]);
  return delta;
}

}  // namespace fovea
