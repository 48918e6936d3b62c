// Finding and reading the files a tokenizer is made of (tokenizer.model, tokenizer.json, vocab.json + merges.txt,
// and the added tokens listed in tokenizer_config.json / added_tokens.json beside them).
#pragma once
#include <string>
#include <vector>

#include "tokenizer/added_tokens.h"

namespace fovea {

std::string read_file_bytes(const std::string& path);  // throws naming the file

// Added tokens declared next to a tokenizer in `dir`: tokenizer_config.json's added_tokens_decoder, then
// added_tokens.json for any id not named there. Missing files mean no tokens; malformed ones throw.
std::vector<AddedToken> read_config_added_tokens(const std::string& dir);

}  // namespace fovea
