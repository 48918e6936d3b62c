#include "model/config_json.h"

#include <climits>
#include <cmath>

#include "core/error.h"

namespace fovea {

JsonSection JsonSection::child(const char* key) const {
  FOVEA_CHECK(has(key) && json[key].is_object(), where, ": missing object '", key, "'");
  return JsonSection{json[key], str(where, ".", key)};
}

int JsonSection::get_int(const char* key) const {
  FOVEA_CHECK(has(key), where, ": missing '", key, "'");
  return get_int(key, 0);
}

int JsonSection::get_int(const char* key, int fallback) const {
  if (!has(key)) return fallback;
  const auto& v = json[key];
  FOVEA_CHECK(v.is_number_integer(), where, ".", key, " must be an integer, got ", v.dump());
  // nlohmann's get<int>() narrows silently (4294967360 would read as 64): check the range first.
  const bool fits = v.is_number_unsigned() ? v.get<uint64_t>() <= uint64_t(INT_MAX)
                                           : v.get<int64_t>() >= INT_MIN && v.get<int64_t>() <= INT_MAX;
  FOVEA_CHECK(fits, where, ".", key, " = ", v.dump(), " is out of range (at most ", INT_MAX, ")");
  return v.get<int>();
}

double JsonSection::get_double(const char* key, double fallback) const {
  if (!has(key)) return fallback;
  const auto& v = json[key];
  FOVEA_CHECK(v.is_number(), where, ".", key, " must be a number, got ", v.dump());
  return v.get<double>();
}

double JsonSection::get_positive(const char* key, double fallback) const {
  const double v = get_double(key, fallback);
  FOVEA_CHECK(std::isfinite(v) && v > 0, where, ".", key, " must be a positive number, got ", v);
  return v;
}

bool JsonSection::get_bool(const char* key, bool fallback) const {
  if (!has(key)) return fallback;
  const auto& v = json[key];
  if (v.is_number_integer()) return v.get<int>() != 0;  // InternVL writes use_llm_lora: 0
  FOVEA_CHECK(v.is_boolean(), where, ".", key, " must be true or false, got ", v.dump());
  return v.get<bool>();
}

std::string JsonSection::get_string(const char* key, const std::string& fallback) const {
  if (!has(key)) return fallback;
  const auto& v = json[key];
  FOVEA_CHECK(v.is_string(), where, ".", key, " must be a string, got ", v.dump());
  return v.get<std::string>();
}

int JsonSection::get_square(const char* key, int fallback) const {
  if (!has(key)) return fallback;
  const auto& v = json[key];
  if (v.is_array()) {
    FOVEA_CHECK(v.size() == 2 && v[0].is_number_integer() && v[0] == v[1], where, ".", key, " must be square, got ",
                v.dump());
    return v[0].get<int>();
  }
  return get_int(key);
}

std::string JsonSection::first_architecture() const {
  if (!has("architectures") || !json["architectures"].is_array() || json["architectures"].empty()) return "";
  const auto& a = json["architectures"][0];
  return a.is_string() ? a.get<std::string>() : "";
}

}  // namespace fovea
