// Parsing JSON that a client or a batch line sent, with bounds on nesting depth and element count applied while
// parsing: what lies past a bound is never built (nlohmann's parser keeps its own stack, so a deep nest does not
// recurse while parsing, but copying, dumping or comparing a deep tree does, and a 100k-deep body overflowed the
// stack). Every door parses its input lines and bodies through this, and each says "nests too deep" in its own
// words.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace fovea {

struct JsonLimits {
  int max_depth = 32;              // containers inside containers below the root (the root is depth 0)
  int64_t max_elements = 100000;   // values, arrays and objects
};

enum class JsonOverLimit { None, Depth, Elements };

// Parses `text`; the parts beyond a limit are dropped and *over says which limit was passed first (None when the
// whole text is in *out). Throws nlohmann::json::parse_error on invalid JSON.
nlohmann::json parse_json_within(const std::string& text, const JsonLimits& limits, JsonOverLimit* over);

// "nests deeper than 32 levels" / "holds more than 100000 elements" ("" for None).
std::string json_limit_text(JsonOverLimit over, const JsonLimits& limits);

}  // namespace fovea
