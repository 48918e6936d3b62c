#include <gtest/gtest.h>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/unicode.h"

using namespace fovea;

TEST(Unicode, Classes) {
  EXPECT_EQ(unicode::char_flags('a'), unicode::kLetter);
  EXPECT_EQ(unicode::char_flags(0x4E2D), unicode::kLetter);  // 中
  EXPECT_EQ(unicode::char_flags('7'), unicode::kNumber);
  EXPECT_EQ(unicode::char_flags(0x00BD), unicode::kNumber);  // ½ is No
  EXPECT_EQ(unicode::char_flags(' '), unicode::kWhiteSpace);
  EXPECT_EQ(unicode::char_flags(0x3000), unicode::kWhiteSpace);
  EXPECT_EQ(unicode::char_flags('!'), 0);
  EXPECT_TRUE(unicode::char_flags(0x0301) & unicode::kNfcTouched);
}

TEST(Unicode, Nfc) {
  EXPECT_EQ(unicode::nfc("plain ascii"), "plain ascii");
  EXPECT_EQ(unicode::nfc("e\xCC\x81"), "\xC3\xA9");                                 // e + acute -> é
  EXPECT_EQ(unicode::nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");  // jamo -> 각
  // a + dot below (ccc 220) + dot above (ccc 230) in the wrong order: reordered, then composed.
  EXPECT_EQ(unicode::nfc("a\xCC\x87\xCC\xA3"), "\xE1\xBA\xA1\xCC\x87");
  EXPECT_EQ(unicode::nfc("\xE2\x84\xAB"), "\xC3\x85");  // Angstrom sign (singleton) -> Å
}

namespace {
std::vector<std::string> pieces(const std::string& text) {
  std::vector<std::string> out;
  for (auto [b, e] : qwen2_pretokenize(text)) out.push_back(text.substr(b, e - b));
  return out;
}
}  // namespace

TEST(Qwen2Pretokenizer, MatchesTheRegex) {
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces("Hello world"), (V{"Hello", " world"}));
  EXPECT_EQ(pieces("I'll can'T"), (V{"I", "'ll", " can", "'T"}));
  EXPECT_EQ(pieces("123 abc"), (V{"1", "2", "3", " abc"}));
  EXPECT_EQ(pieces("a  b"), (V{"a", " ", " b"}));
  EXPECT_EQ(pieces("a \n\n b"), (V{"a", " \n\n", " b"}));
  EXPECT_EQ(pieces("x   "), (V{"x", "   "}));
  EXPECT_EQ(pieces(" ...!\n\nok"), (V{" ...!\n\n", "ok"}));
  EXPECT_EQ(pieces("\tx"), (V{"\tx"}));
  EXPECT_EQ(pieces(""), V{});
}
