// UTF-8 helpers shared by both tokenizers. Invalid input has one defined meaning everywhere: each byte that does
// not start a well-formed sequence (RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF) stands for
// U+FFFD, one replacement per bad byte — the same rule libsentencepiece's normalizer applies.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace fovea::utf8 {

constexpr char32_t kReplacement = 0xFFFD;

// Length of the well-formed sequence starting at text[pos], or 0 when the bytes there are not one.
size_t valid_sequence_length(std::string_view text, size_t pos);

// Decodes the character at text[pos]; sets `length` to the bytes consumed (1 for an invalid byte, which decodes
// as U+FFFD).
char32_t decode(std::string_view text, size_t pos, size_t& length);

void append(std::string& out, char32_t code_point);

// Replaces every invalid byte with U+FFFD; returns the input unchanged when it is already valid.
std::string sanitize(std::string_view text);

// Number of bytes at the end of `text` that form the start of a sequence which more bytes could still complete
// (0..3). Streaming decoders hold these back.
size_t incomplete_tail_length(std::string_view text);

}  // namespace fovea::utf8
