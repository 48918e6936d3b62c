#include "core/error.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <iterator>

namespace fovea {

namespace {
std::string located(const char *file, int line, const std::string &message) {
  const char *base = std::strrchr(file, '/');
  return str(base ? base + 1 : file, ":", line, ": ", message);
}
} // namespace

namespace {

constexpr size_t kClientErrorMaxBytes = 1024;

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' ||
         c == '.' || c == '/';
}

// Length of a "name.ext:LINE: " location starting at `at`, or 0 when none
// starts there.
size_t location_length(const std::string &s, size_t at) {
  size_t i = at;
  while (i < s.size() && is_name_char(s[i]))
    ++i;
  const std::string name = s.substr(at, i - at);
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos || dot == 0)
    return 0;
  static const char *kSourceExtensions[] = {"cc",  "h",   "cu",
                                            "cuh", "cpp", "hpp"};
  const std::string ext = name.substr(dot + 1);
  if (std::find(std::begin(kSourceExtensions), std::end(kSourceExtensions),
                ext) == std::end(kSourceExtensions))
    return 0;
  if (i >= s.size() || s[i] != ':')
    return 0;
  size_t j = i + 1;
  while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j])))
    ++j;
  if (j == i + 1 || j + 1 >= s.size() + 1 || s.compare(j, 2, ": ") != 0)
    return 0;
  return j + 2 - at;
}

// The longest prefix of `s` of at most max_bytes that does not end inside a
// UTF-8 sequence.
size_t utf8_cut(const std::string &s, size_t max_bytes) {
  if (s.size() <= max_bytes)
    return s.size();
  size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80)
    --cut;
  return cut;
}

} // namespace

std::string client_error_text(const std::string &message) {
  std::string out;
  out.reserve(std::min(message.size(), kClientErrorMaxBytes + 64));
  for (size_t i = 0; i < message.size();) {
    const bool word_start = i == 0 || !is_name_char(message[i - 1]);
    const size_t skip = word_start ? location_length(message, i) : 0;
    if (skip > 0) {
      i += skip;
      continue;
    }
    out += message[i++];
    if (out.size() > kClientErrorMaxBytes + 8)
      break; // cut below; no need to scan megabytes
  }
  if (out.size() <= kClientErrorMaxBytes)
    return out;
  return out.substr(0, utf8_cut(out, kClientErrorMaxBytes)) +
         str("… (", message.size(), " bytes)");
}

std::string excerpt(const std::string &text, size_t max_bytes) {
  if (text.size() <= max_bytes)
    return text;
  return text.substr(0, utf8_cut(text, max_bytes)) +
         str("… (", text.size(), " bytes)");
}

void throw_error(const char *file, int line, const std::string &message) {
  throw Error(located(file, line, message));
}

void throw_request_error(ErrorKind kind, const char *file, int line,
                         const std::string &message) {
  throw RequestError(kind, located(file, line, message));
}

} // namespace fovea
