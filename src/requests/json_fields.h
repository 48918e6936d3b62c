// Request fields that several doors read from JSON (a tasks line, an OpenAI
// body), read by one rule each so that the same value means the same thing, and
// fails the same way, whichever door it came through.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace fovea {

// As vLLM's guided_choice: the most answers one request may list.
constexpr int kMaxRequestChoices = 64;

// `value` must be an array of 1 to kMaxRequestChoices non-empty strings (JSON
// null: none given, *out empty). false with *error ("\"KEY\" must be an array
// of 1 to 64 non-empty strings") otherwise.
bool read_choice_list(const nlohmann::json &value, const std::string &key,
                      std::vector<std::string> *out, std::string *error);

} // namespace fovea
