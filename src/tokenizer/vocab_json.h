// A fast reader for vocab.json (one flat JSON object of string -> integer): the Qwen2 vocabulary has 151k
// entries, and a general JSON DOM spends most of the tokenizer's load time building it.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

namespace fovea {

// Throws fovea::Error naming `where` on anything that is not such an object.
std::unordered_map<std::string, int32_t> parse_vocab_json(std::string_view text, const std::string& where);

}  // namespace fovea
