#include "tokenizer/utf8.h"

namespace fovea::utf8 {
namespace {

bool is_continuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

// Expected total length for a lead byte, 0 if it can never start a sequence.
size_t lead_length(unsigned char byte) {
  if (byte < 0x80) return 1;
  if (byte >= 0xC2 && byte <= 0xDF) return 2;
  if (byte >= 0xE0 && byte <= 0xEF) return 3;
  if (byte >= 0xF0 && byte <= 0xF4) return 4;
  return 0;
}

// The allowed range of the second byte, which is where overlongs, surrogates and > U+10FFFF are excluded.
bool second_byte_ok(unsigned char lead, unsigned char second) {
  switch (lead) {
    case 0xE0:
      return second >= 0xA0 && second <= 0xBF;
    case 0xED:
      return second >= 0x80 && second <= 0x9F;
    case 0xF0:
      return second >= 0x90 && second <= 0xBF;
    case 0xF4:
      return second >= 0x80 && second <= 0x8F;
    default:
      return is_continuation(second);
  }
}

}  // namespace

size_t valid_sequence_length(std::string_view text, size_t pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  const size_t length = lead_length(lead);
  if (length <= 1 || pos + length > text.size()) return length == 1 ? 1 : 0;
  if (!second_byte_ok(lead, static_cast<unsigned char>(text[pos + 1]))) return 0;
  for (size_t i = 2; i < length; ++i)
    if (!is_continuation(static_cast<unsigned char>(text[pos + i]))) return 0;
  return length;
}

char32_t decode(std::string_view text, size_t pos, size_t& length) {
  length = valid_sequence_length(text, pos);
  if (length == 0) {
    length = 1;
    return kReplacement;
  }
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[pos + i]); };
  switch (length) {
    case 1:
      return byte(0);
    case 2:
      return (char32_t(byte(0) & 0x1F) << 6) | (byte(1) & 0x3F);
    case 3:
      return (char32_t(byte(0) & 0x0F) << 12) | (char32_t(byte(1) & 0x3F) << 6) | (byte(2) & 0x3F);
    default:
      return (char32_t(byte(0) & 0x07) << 18) | (char32_t(byte(1) & 0x3F) << 12) | (char32_t(byte(2) & 0x3F) << 6) |
             (byte(3) & 0x3F);
  }
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

std::string sanitize(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const size_t length = valid_sequence_length(text, pos);
    if (length == 0) {
      append(out, kReplacement);
      pos += 1;
    } else {
      out.append(text.substr(pos, length));
      pos += length;
    }
  }
  return out;
}

size_t incomplete_tail_length(std::string_view text) {
  // A sequence is at most 4 bytes, so only the last 3 bytes can be an unfinished one.
  for (size_t back = 1; back <= 3 && back <= text.size(); ++back) {
    const size_t start = text.size() - back;
    const auto lead = static_cast<unsigned char>(text[start]);
    if (is_continuation(lead)) continue;
    const size_t need = lead_length(lead);
    if (need <= back) return 0;  // complete (or an invalid lead byte): nothing to wait for
    if (back >= 2 && !second_byte_ok(lead, static_cast<unsigned char>(text[start + 1]))) return 0;
    return back;
  }
  return 0;
}

}  // namespace fovea::utf8
