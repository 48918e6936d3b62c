#include "engine/stats_json.h"

#include "engine/stats_fields.h"

namespace fovea {

nlohmann::ordered_json stats_json(const EngineStats& s) {
  nlohmann::ordered_json j;
  for (const StatField& field : engine_stats_fields())
    std::visit([&](auto member) { j[field.name] = s.*member; }, field.member);
  nlohmann::ordered_json engines = nlohmann::ordered_json::array();
  for (const EngineStats& e : s.engines) engines.push_back(stats_json(e));
  j["engines"] = engines;
  return j;
}

}  // namespace fovea
