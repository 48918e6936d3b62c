#include "requests/json_limits.h"

#include "core/error.h"

namespace fovea {

nlohmann::json parse_json_within(const std::string& text, const JsonLimits& limits, JsonOverLimit* over) {
  using Json = nlohmann::json;
  *over = JsonOverLimit::None;
  int64_t elements = 0;
  // Returning false drops the value (and every child of a dropped container) before it is built; parsing goes on
  // to the end, with the parser's own heap stack, so the text's validity is still checked.
  const Json::parser_callback_t keep = [&](int depth, Json::parse_event_t event, Json&) {
    const bool starts = event == Json::parse_event_t::value || event == Json::parse_event_t::object_start ||
                        event == Json::parse_event_t::array_start;
    if (event == Json::parse_event_t::key) return depth <= limits.max_depth;
    if (depth > limits.max_depth) {
      if (*over == JsonOverLimit::None) *over = JsonOverLimit::Depth;
      return false;
    }
    if (starts && ++elements > limits.max_elements) {
      if (*over == JsonOverLimit::None) *over = JsonOverLimit::Elements;
      return false;
    }
    return true;
  };
  return Json::parse(text, keep);
}

std::string json_limit_text(JsonOverLimit over, const JsonLimits& limits) {
  switch (over) {
    case JsonOverLimit::Depth: return str("nests deeper than ", limits.max_depth, " levels");
    case JsonOverLimit::Elements: return str("holds more than ", limits.max_elements, " elements");
    case JsonOverLimit::None: break;
  }
  return "";
}

}  // namespace fovea
