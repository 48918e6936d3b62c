// The one description of EngineStats (include/fovea/options.h): every field's name, meaning, kind and member.
// /metrics (server/metrics.cc), the JSON of Engine.stats() and `fovea bench` (engine/stats_json.cc) and the
// data-parallel dispatcher's sums (engine/data_parallel.cc) all walk this table, so a field added to EngineStats
// and listed here reaches all of them; tests/engine/test_stats_fields.cc checks that none is left out.
#pragma once
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "fovea/options.h"

namespace fovea {

enum class StatKind {
  Counter,  // only grows: summed over engines; a run's share is after minus before
  Gauge,    // a level now: summed over engines; a run's share is the level after it
  Health,   // `failed`: behind a dispatcher, true once every engine has failed
  Label,    // text (which engine, why it failed): not a number, not summed
};

using StatMember = std::variant<int64_t EngineStats::*, int EngineStats::*, double EngineStats::*, bool EngineStats::*,
                                std::string EngineStats::*>;

struct StatField {
  const char* name;  // the member's name, the JSON key
  StatMember member;
  StatKind kind;
  const char* help;  // one line: what it counts, in what unit
  // The Prometheus series, e.g. "fovea_prompt_tokens_total" or "fovea_stage_seconds_total{stage=\"vit\"}" (fields
  // that share a name are one metric, the first one's help its HELP); "" for Label fields. Per engine, behind a
  // dispatcher, the same series is "fovea_engine_..." with an engine="..." label.
  const char* metric;
  double metric_scale = 1.0;  // field value x this = the metric's value (ms -> s)
};

// Every field of EngineStats except `engines` (each engine's own EngineStats, rendered with the same table).
const std::vector<StatField>& engine_stats_fields();

// A Counter, Gauge or Health field as a number (Health: 1 when failed).
double stat_number(const StatField& field, const EngineStats& stats);

// Adds every Counter and Gauge field of `part` to `total` (Health and Label fields are the caller's).
void add_stats(EngineStats& total, const EngineStats& part);

// What happened between two readings of one service: Counters subtracted, the rest as `after` has them (per
// engine too, matched by position).
EngineStats stats_delta(const EngineStats& after, const EngineStats& before);

}  // namespace fovea
