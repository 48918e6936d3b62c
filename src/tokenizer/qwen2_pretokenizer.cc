#include "tokenizer/qwen2_pretokenizer.h"

#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace fovea {

const char* const kQwen2PretokenizerRegex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";

namespace {

struct Char {
  char32_t cp;
  uint8_t flags;
  size_t byte;  // offset of the character in the text
};

bool is_newline(const Char& c) { return c.cp == '\r' || c.cp == '\n'; }
bool is_letter(const Char& c) { return c.flags & unicode::kLetter; }
bool is_space(const Char& c) { return c.flags & unicode::kWhiteSpace; }
// [^\s\p{L}\p{N}]
bool is_other(const Char& c) { return !(c.flags & (unicode::kLetter | unicode::kNumber | unicode::kWhiteSpace)); }

// Case-insensitive ASCII letter match; 's' also matches U+017F LATIN SMALL LETTER LONG S, as Unicode case
// folding (which the regex engine applies under (?i)) folds it to 's'.
bool letter_is(char32_t cp, char lower) {
  if (cp == char32_t(lower) || cp == char32_t(lower - 'a' + 'A')) return true;
  return lower == 's' && cp == 0x17F;
}

class Matcher {
 public:
  explicit Matcher(const std::vector<Char>& chars) : c_(chars), n_(chars.size()) {}

  // Length in characters of the match at i (at least 1: the alternatives together match any character).
  size_t match(size_t i) const {
    if (size_t m = contraction(i)) return m;
    if (size_t m = letters(i)) return m;
    if (c_[i].flags & unicode::kNumber) return 1;
    if (size_t m = punctuation(i)) return m;
    if (size_t m = spaces_then_newlines(i)) return m;
    return spaces(i);
  }

 private:
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)
  size_t contraction(size_t i) const {
    if (c_[i].cp != '\'' || i + 1 >= n_) return 0;
    const char32_t a = c_[i + 1].cp;
    if (letter_is(a, 's') || letter_is(a, 't') || letter_is(a, 'm') || letter_is(a, 'd')) return 2;
    if (i + 2 >= n_) return 0;
    const char32_t b = c_[i + 2].cp;
    if ((letter_is(a, 'r') || letter_is(a, 'v')) && letter_is(b, 'e')) return 3;
    if (letter_is(a, 'l') && letter_is(b, 'l')) return 3;
    return 0;
  }
  // [^\r\n\p{L}\p{N}]?\p{L}+
  size_t letters(size_t i) const {
    size_t j = i;
    if (!is_letter(c_[j])) {
      if (is_newline(c_[j]) || (c_[j].flags & unicode::kNumber)) return 0;
      ++j;
    }
    const size_t first_letter = j;
    while (j < n_ && is_letter(c_[j])) ++j;
    return j > first_letter ? j - i : 0;
  }
  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  size_t punctuation(size_t i) const {
    size_t j = i;
    if (c_[j].cp == ' ' && j + 1 < n_ && is_other(c_[j + 1])) ++j;
    if (!is_other(c_[j])) return 0;
    while (j < n_ && is_other(c_[j])) ++j;
    while (j < n_ && is_newline(c_[j])) ++j;
    return j - i;
  }
  // \s*[\r\n]+ : greedy \s* backs off to the last newline of the white-space run.
  size_t spaces_then_newlines(size_t i) const {
    size_t end = i;
    while (end < n_ && is_space(c_[end])) ++end;
    for (size_t k = end; k > i; --k)
      if (is_newline(c_[k - 1])) return k - i;
    return 0;
  }
  // \s+(?!\S) then \s+ : a run of white space, less its last character when a non-space follows it.
  size_t spaces(size_t i) const {
    size_t end = i;
    while (end < n_ && is_space(c_[end])) ++end;
    if (end == i) return 1;  // unreachable: every character matches an earlier alternative or this one
    if (end < n_ && end - i > 1) return end - i - 1;
    return end - i;
  }

  const std::vector<Char>& c_;
  size_t n_;
};

}  // namespace

std::vector<std::pair<size_t, size_t>> qwen2_pretokenize(std::string_view text) {
  std::vector<Char> chars;
  chars.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    size_t length = 0;
    const char32_t cp = utf8::decode(text, pos, length);
    chars.push_back({cp, unicode::char_flags(cp), pos});
    pos += length;
  }
  std::vector<std::pair<size_t, size_t>> pieces;
  const Matcher matcher(chars);
  for (size_t i = 0; i < chars.size();) {
    const size_t length = matcher.match(i);
    const size_t end = i + length;
    pieces.emplace_back(chars[i].byte, end < chars.size() ? chars[end].byte : text.size());
    i = end;
  }
  return pieces;
}

}  // namespace fovea
