// EngineStats as one JSON object, every field of engine/stats_fields.h (and each engine's own under "engines",
// behind a data-parallel dispatcher): what the Python API's Engine.stats() returns and `fovea bench` records.
#pragma once
#include <nlohmann/json.hpp>

#include "fovea/options.h"

namespace fovea {

nlohmann::ordered_json stats_json(const EngineStats& s);

}  // namespace fovea
