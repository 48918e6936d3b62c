#include "tokenizer/unicode.h"

#include <algorithm>
#include <vector>

#include "tokenizer/unicode_tables.h"
#include "tokenizer/utf8.h"

namespace fovea::unicode {
namespace {

constexpr char32_t kMaxCodePoint = 0x10FFFF;
// Hangul syllables are composed and decomposed by arithmetic (Unicode 3.12), not by table.
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

// One byte of flags per code point (1.1 MB), built on first use: the pre-tokenizer asks for every character.
const std::vector<uint8_t>& flag_table() {
  static const std::vector<uint8_t> table = [] {
    std::vector<uint8_t> flags(kMaxCodePoint + 1, 0);
    const auto mark = [&](const tables::CodeRange* ranges, size_t count, uint8_t flag) {
      for (size_t i = 0; i < count; ++i)
        for (char32_t cp = ranges[i].first; cp <= ranges[i].last; ++cp) flags[cp] |= flag;
    };
    mark(tables::kLetters, tables::kLettersCount, kLetter);
    mark(tables::kNumbers, tables::kNumbersCount, kNumber);
    mark(tables::kWhiteSpace, tables::kWhiteSpaceCount, kWhiteSpace);
    mark(tables::kNfcTouched, tables::kNfcTouchedCount, kNfcTouched);
    return flags;
  }();
  return table;
}

uint8_t combining_class(char32_t cp) {
  const auto* begin = tables::kCombiningClasses;
  const auto* end = begin + tables::kCombiningClassesCount;
  const auto* it = std::lower_bound(begin, end, cp, [](const auto& e, char32_t v) { return e.code_point < v; });
  return it != end && it->code_point == cp ? it->ccc : 0;
}

void decompose(char32_t cp, std::u32string& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const char32_t index = cp - kSBase;
    out += kLBase + index / kNCount;
    out += kVBase + (index % kNCount) / kTCount;
    if (index % kTCount != 0) out += kTBase + index % kTCount;
    return;
  }
  const auto* begin = tables::kDecompositions;
  const auto* end = begin + tables::kDecompositionsCount;
  const auto* it = std::lower_bound(begin, end, cp, [](const auto& e, char32_t v) { return e.code_point < v; });
  if (it == end || it->code_point != cp) {
    out += cp;
    return;
  }
  out.append(tables::kDecompositionData + it->offset, it->length);
}

// The primary composite of (first, second), or 0.
char32_t compose(char32_t first, char32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase && second < kVBase + kVCount)
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 && second > kTBase &&
      second < kTBase + kTCount)
    return first + (second - kTBase);
  const auto* begin = tables::kCompositions;
  const auto* end = begin + tables::kCompositionsCount;
  const auto* it = std::lower_bound(begin, end, std::pair{first, second}, [](const auto& e, const auto& v) {
    return e.first != v.first ? e.first < v.first : e.second < v.second;
  });
  return it != end && it->first == first && it->second == second ? it->composite : 0;
}

// Canonical ordering: a stable sort of every run of non-starters by combining class.
void reorder(std::u32string& text) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (combining_class(text[i]) == 0) continue;
    size_t end = i;
    while (end < text.size() && combining_class(text[end]) != 0) ++end;
    std::stable_sort(text.begin() + i, text.begin() + end,
                     [](char32_t a, char32_t b) { return combining_class(a) < combining_class(b); });
    i = end;
  }
}

// Canonical composition (UAX #15): each character joins the last starter unless a character in between has a
// combining class >= its own.
void recompose(std::u32string& text) {
  if (text.empty()) return;
  size_t starter = 0, write = 1;
  int last_class = combining_class(text[0]) == 0 ? 0 : 256;
  for (size_t read = 1; read < text.size(); ++read) {
    const char32_t ch = text[read];
    const int ch_class = combining_class(ch);
    const char32_t composite = last_class == 256 ? 0 : compose(text[starter], ch);
    if (composite != 0 && (last_class < ch_class || last_class == 0)) {
      text[starter] = composite;
      continue;
    }
    if (ch_class == 0) starter = write;
    last_class = ch_class;
    text[write++] = ch;
  }
  text.resize(write);
}

}  // namespace

uint8_t char_flags(char32_t cp) { return cp <= kMaxCodePoint ? flag_table()[cp] : 0; }

const char* data_version() { return tables::kUnicodeVersion; }

std::string nfc(std::string_view text) {
  const auto& flags = flag_table();
  bool touched = false;
  for (size_t pos = 0; pos < text.size() && !touched;) {
    size_t length = 0;
    const char32_t cp = utf8::decode(text, pos, length);
    pos += length;
    touched = cp >= 0x300 && (flags[cp] & kNfcTouched);  // below U+0300 everything is NFC-stable
  }
  if (!touched) return std::string(text);
  std::u32string decomposed;
  decomposed.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    size_t length = 0;
    const char32_t cp = utf8::decode(text, pos, length);
    pos += length;
    decompose(cp, decomposed);
  }
  reorder(decomposed);
  recompose(decomposed);
  std::string out;
  out.reserve(text.size());
  for (char32_t cp : decomposed) utf8::append(out, cp);
  return out;
}

}  // namespace fovea::unicode
