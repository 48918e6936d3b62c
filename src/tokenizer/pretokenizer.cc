#include "tokenizer/pretokenizer.h"

#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace fovea {

const char* split_pattern_regex(SplitPattern pattern) {
  switch (pattern) {
    case SplitPattern::Qwen2:
      return "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
             "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    case SplitPattern::Llama3:
      return "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
             "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    case SplitPattern::Gpt2:
      return "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
  }
  return "";
}

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

bool is_number(const Char& c) { return c.flags & unicode::kNumber; }

class Matcher {
 public:
  Matcher(const std::vector<Char>& chars, size_t end, SplitPattern pattern)
      : c_(chars), n_(end), pattern_(pattern) {}

  // Length in characters of the match at i (at least 1: the alternatives together match any character).
  size_t match(size_t i) const {
    if (pattern_ == SplitPattern::Gpt2) return match_gpt2(i);
    if (size_t m = contraction(i, /*ignore_case=*/true)) return m;
    if (size_t m = letters(i)) return m;
    if (is_number(c_[i])) return pattern_ == SplitPattern::Llama3 ? run(i, is_number, 3) : 1;
    if (size_t m = punctuation(i, /*newlines=*/true)) return m;
    if (size_t m = spaces_then_newlines(i)) return m;
    return spaces(i);
  }

 private:
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  size_t match_gpt2(size_t i) const {
    if (size_t m = contraction(i, /*ignore_case=*/false)) return m;
    const size_t after_space = c_[i].cp == ' ' && i + 1 < n_ ? i + 1 : i;
    if (is_letter(c_[after_space])) return after_space - i + run(after_space, is_letter, n_);
    if (is_number(c_[after_space])) return after_space - i + run(after_space, is_number, n_);
    if (size_t m = punctuation(i, /*newlines=*/false)) return m;
    return spaces(i);
  }
  // Characters from i on (at most `limit`) for which `pred` holds.
  size_t run(size_t i, bool (*pred)(const Char&), size_t limit) const {
    size_t j = i;
    while (j < n_ && j - i < limit && pred(c_[j])) ++j;
    return j - i;
  }
  // (?i:'s|'t|'re|'ve|'m|'ll|'d), or GPT-2's case-sensitive 's|'t|'re|'ve|'m|'ll|'d
  size_t contraction(size_t i, bool ignore_case) const {
    if (c_[i].cp != '\'' || i + 1 >= n_) return 0;
    auto is = [ignore_case](char32_t cp, char lower) {
      return ignore_case ? letter_is(cp, lower) : cp == char32_t(lower);
    };
    const char32_t a = c_[i + 1].cp;
    if (is(a, 's') || is(a, 't') || is(a, 'm') || is(a, 'd')) return 2;
    if (i + 2 >= n_) return 0;
    const char32_t b = c_[i + 2].cp;
    if ((is(a, 'r') || is(a, 'v')) && is(b, 'e')) return 3;
    if (is(a, 'l') && is(b, 'l')) return 3;
    return 0;
  }
  // [^\r\n\p{L}\p{N}]?\p{L}+
  size_t letters(size_t i) const {
    size_t j = i;
    if (!is_letter(c_[j])) {
      if (is_newline(c_[j]) || is_number(c_[j])) return 0;
      ++j;
    }
    const size_t first_letter = j;
    while (j < n_ && is_letter(c_[j])) ++j;
    return j > first_letter ? j - i : 0;
  }
  //  ?[^\s\p{L}\p{N}]+[\r\n]*  (the trailing newlines only in Qwen2 / Llama-3)
  size_t punctuation(size_t i, bool newlines) const {
    size_t j = i;
    if (c_[j].cp == ' ' && j + 1 < n_ && is_other(c_[j + 1])) ++j;
    if (!is_other(c_[j])) return 0;
    while (j < n_ && is_other(c_[j])) ++j;
    while (newlines && j < n_ && is_newline(c_[j])) ++j;
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
  size_t n_;  // end of the span being split: nothing past it is seen (lookahead included)
  SplitPattern pattern_;
};

}  // namespace

std::vector<std::pair<size_t, size_t>> pretokenize(const PreTokenizer& pre, std::string_view text) {
  std::vector<Char> chars;
  chars.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    size_t length = 0;
    const char32_t cp = utf8::decode(text, pos, length);
    chars.push_back({cp, unicode::char_flags(cp), pos});
    pos += length;
  }
  auto byte_at = [&](size_t i) { return i < chars.size() ? chars[i].byte : text.size(); };
  std::vector<std::pair<size_t, size_t>> pieces;
  // Each span is split on its own, as a Sequence pre-tokenizer runs its next step on every piece of the last:
  // with isolate_digits, every \p{N} character is a span of its own.
  auto split_span = [&](size_t begin, size_t end) {
    const Matcher matcher(chars, end, pre.pattern);
    for (size_t i = begin; i < end;) {
      const size_t next = i + matcher.match(i);
      pieces.emplace_back(chars[i].byte, byte_at(next));
      i = next;
    }
  };
  size_t span = 0;
  for (size_t i = 0; i < chars.size(); ++i) {
    if (!pre.isolate_digits || !is_number(chars[i])) continue;
    split_span(span, i);
    split_span(i, i + 1);
    span = i + 1;
  }
  split_span(span, chars.size());
  return pieces;
}

}  // namespace fovea
