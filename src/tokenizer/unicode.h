// Unicode properties and NFC for the byte-level BPE tokenizer (data from unicode_tables.cc; see
// gen_unicode_tables.py for its version and how it relates to what Hugging Face `tokenizers` uses).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace fovea::unicode {

enum CharFlag : uint8_t {
  kLetter = 1,      // \p{L}
  kNumber = 2,      // \p{N}
  kWhiteSpace = 4,  // \s (the White_Space property)
  kNfcTouched = 8,  // may change under NFC
};

uint8_t char_flags(char32_t code_point);  // 0 outside the Unicode range
const char* data_version();

// Canonical composition (NFC) of valid UTF-8. Text with no character that NFC could touch is returned as is.
std::string nfc(std::string_view text);

}  // namespace fovea::unicode
