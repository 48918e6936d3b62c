// Raw Unicode data tables (generated into unicode_tables.cc by gen_unicode_tables.py); unicode.h is the API.
#pragma once
#include <cstddef>
#include <cstdint>

namespace fovea::unicode::tables {

struct CodeRange {
  char32_t first, last;  // inclusive
};
struct CombiningClass {
  char32_t code_point;
  uint8_t ccc;
};
struct Decomposition {
  char32_t code_point;
  uint32_t offset, length;  // into kDecompositionData; fully (recursively) decomposed, canonical only
};
struct Composition {
  char32_t first, second, composite;  // sorted by (first, second)
};

extern const char* const kUnicodeVersion;
extern const CodeRange kLetters[];
extern const size_t kLettersCount;
extern const CodeRange kNumbers[];
extern const size_t kNumbersCount;
extern const CodeRange kWhiteSpace[];
extern const size_t kWhiteSpaceCount;
extern const CodeRange kNfcTouched[];
extern const size_t kNfcTouchedCount;
extern const CombiningClass kCombiningClasses[];
extern const size_t kCombiningClassesCount;
extern const char32_t kDecompositionData[];
extern const Decomposition kDecompositions[];
extern const size_t kDecompositionsCount;
extern const Composition kCompositions[];
extern const size_t kCompositionsCount;

}  // namespace fovea::unicode::tables
