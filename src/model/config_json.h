// Small helpers for reading config.json fields with errors that name the file and the key path.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace fovea {

// A JSON object together with where it came from ("/dir/config.json: llm_config"), for error messages.
struct JsonSection {
  const nlohmann::json& json;
  std::string where;

  bool has(const char* key) const { return json.contains(key) && !json[key].is_null(); }
  JsonSection child(const char* key) const;  // throws if absent or not an object
  int get_int(const char* key) const;        // throws if absent or not an integer
  int get_int(const char* key, int fallback) const;  // throws outside int's range
  double get_double(const char* key, double fallback) const;
  double get_positive(const char* key, double fallback) const;  // throws unless finite and > 0
  bool get_bool(const char* key, bool fallback) const;
  std::string get_string(const char* key, const std::string& fallback) const;
  // image_size / patch_size may be a number or a square [h, w] pair.
  int get_square(const char* key, int fallback) const;
  std::string first_architecture() const;  // architectures[0] or ""
};

}  // namespace fovea
