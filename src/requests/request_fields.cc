#include "requests/request_fields.h"

#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "requests/json_fields.h"

namespace fovea {
namespace {

using Json = nlohmann::json;

bool refuse(FieldError* error, const std::string& message, const std::string& param) {
  *error = FieldError{message, param};
  return false;
}

bool read_number(const Json& object, const char* name, double lo, double hi, float* out, FieldError* error) {
  const auto it = object.find(name);
  if (it == object.end() || it->is_null()) return true;
  if (!it->is_number()) return refuse(error, str(name, " must be a number"), name);
  const double v = it->get<double>();
  if (!(v >= lo && v <= hi)) return refuse(error, str(name, " must be between ", lo, " and ", hi), name);
  *out = float(v);
  return true;
}

bool read_bool(const Json& object, const char* name, bool* out, FieldError* error) {
  const auto it = object.find(name);
  if (it == object.end() || it->is_null()) return true;
  if (!it->is_boolean()) return refuse(error, str(name, " must be a boolean"), name);
  *out = it->get<bool>();
  return true;
}

bool read_stop(const Json& object, GenerationParams* params, FieldError* error) {
  const auto it = object.find("stop");
  if (it == object.end() || it->is_null()) return true;
  params->stop.clear();
  if (it->is_string()) {
    params->stop.push_back(it->get<std::string>());
    return true;
  }
  if (!it->is_array() || it->size() > 4) return refuse(error, "stop must be a string or an array of at most 4 strings", "stop");
  for (const auto& s : *it) {
    if (!s.is_string() || s.get<std::string>().empty()) return refuse(error, "stop must hold non-empty strings", "stop");
    params->stop.push_back(s.get<std::string>());
  }
  return true;
}

bool read_stop_token_ids(const Json& object, GenerationParams* params, FieldError* error) {
  const auto ids = object.find("stop_token_ids");
  if (ids == object.end() || ids->is_null()) return true;
  if (!ids->is_array() || ids->size() > 64)
    return refuse(error, "stop_token_ids must be an array of at most 64 token ids", "stop_token_ids");
  params->stop_token_ids.clear();
  for (const auto& id : *ids) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
      return refuse(error, "stop_token_ids must hold non-negative integers", "stop_token_ids");
    params->stop_token_ids.push_back(int32_t(id.get<int64_t>()));
  }
  return true;
}

// As vLLM's guided_choice: "guided_choice" (or "choices") lists the answers allowed.
bool read_choices(const Json& object, GenerationParams* params, FieldError* error) {
  if (object.contains("guided_choice") && object.contains("choices"))
    return refuse(error, "give guided_choice or choices, not both", "choices");
  const char* key = object.contains("guided_choice") ? "guided_choice" : "choices";
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return true;
  std::string why;
  if (!read_choice_list(*it, key, &params->choices, &why)) return refuse(error, why, key);
  return true;
}

bool read_answers(const Json& object, GenerationParams* params, FieldError* error) {
  const auto it = object.find("answers");
  if (it == object.end() || it->is_null()) return true;
  params->answers.clear();
  if (it->is_array()) {
    for (const auto& a : *it) {
      if (!a.is_string() || a.get<std::string>().empty()) break;
      params->answers.push_back(a.get<std::string>());
    }
    if (params->answers.size() == it->size()) return true;
  }
  return refuse(error, "\"answers\" must be an array of non-empty strings", "answers");
}

}  // namespace

bool read_int_field(const Json& object, const char* name, int64_t lo, int64_t hi, int64_t* out, bool* present,
                    FieldError* error) {
  *present = false;
  const auto it = object.find(name);
  if (it == object.end() || it->is_null()) return true;
  const bool whole_float = it->is_number_float() && std::floor(it->get<double>()) == it->get<double>() &&
                           std::fabs(it->get<double>()) < 9.2e18;
  if (!it->is_number_integer() && !whole_float) return refuse(error, str(name, " must be an integer"), name);
  const bool beyond_int64 = it->is_number_unsigned() && it->get<uint64_t>() > uint64_t(INT64_MAX);
  const int64_t v = whole_float ? int64_t(it->get<double>()) : beyond_int64 ? 0 : it->get<int64_t>();
  if (beyond_int64 || v < lo || v > hi)
    return refuse(error, str(name, " must be between ", lo, " and ", hi, ", got ", excerpt(it->dump())), name);
  *out = v;
  *present = true;
  return true;
}

bool read_sampling_fields(const Json& object, GenerationParams* p, FieldError* error) {
  struct Range {
    const char* name;
    double lo, hi;
    float* value;
  };
  const Range ranges[] = {{"temperature", 0.0, 2.0, &p->temperature},
                          {"top_p", 0.0, 1.0, &p->top_p},
                          {"min_p", 0.0, 1.0, &p->min_p},
                          {"repetition_penalty", 1e-6, 1e6, &p->repetition_penalty},
                          {"presence_penalty", -2.0, 2.0, &p->presence_penalty},
                          {"frequency_penalty", -2.0, 2.0, &p->frequency_penalty}};
  for (const Range& r : ranges)
    if (!read_number(object, r.name, r.lo, r.hi, r.value, error)) return false;
  bool present = false;
  int64_t v = 0;
  if (!read_int_field(object, "top_k", -1, INT32_MAX, &v, &present, error)) return false;
  if (present) p->top_k = int(v);
  // A seed is any 64-bit integer, signed (as OpenAI's) or up to 2^64 - 1 (as vLLM's and Python's).
  const auto seed = object.find("seed");
  if (seed != object.end() && seed->is_number_unsigned()) {
    p->seed = seed->get<uint64_t>();
  } else {
    if (!read_int_field(object, "seed", INT64_MIN, INT64_MAX, &v, &present, error)) return false;
    if (present) p->seed = uint64_t(v);
  }
  return read_stop(object, p, error) && read_stop_token_ids(object, p, error) &&
         read_bool(object, "ignore_eos", &p->ignore_eos, error);
}

bool read_fovea_fields(const Json& object, Request* request, FieldError* error) {
  if (!read_answers(object, &request->params, error) || !read_choices(object, &request->params, error)) return false;
  const auto tiling = object.find("tiling");
  if (tiling != object.end() && !tiling->is_null()) {
    const std::string name = tiling->is_string() ? tiling->get<std::string>() : "";
    if (name == "official") request->tiling = TilingPolicy::Official;
    else if (name == "compact") request->tiling = TilingPolicy::Compact;
    else return refuse(error, "tiling must be \"official\" or \"compact\"", "tiling");
  }
  bool present = false;
  int64_t v = 0;
  if (!read_int_field(object, "max_tiles", 1, 256, &v, &present, error)) return false;
  if (present) request->max_tiles = int(v);
  return true;
}

}  // namespace fovea
