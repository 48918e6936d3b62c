#include "requests/json_fields.h"

#include "core/error.h"

namespace fovea {

bool read_choice_list(const nlohmann::json &value, const std::string &key,
                      std::vector<std::string> *out, std::string *error) {
  out->clear();
  if (value.is_null())
    return true;
  const bool shaped = value.is_array() && !value.empty() &&
                      value.size() <= size_t(kMaxRequestChoices);
  if (shaped) {
    for (const auto &item : value) {
      if (!item.is_string() || item.get<std::string>().empty()) {
        out->clear();
        break;
      }
      out->push_back(item.get<std::string>());
    }
  }
  if (!out->empty())
    return true;
  *error = str("\"", key, "\" must be an array of 1 to ", kMaxRequestChoices,
               " non-empty strings");
  return false;
}

} // namespace fovea
