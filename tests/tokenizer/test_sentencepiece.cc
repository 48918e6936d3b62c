#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "tokenizer/sentencepiece_bpe.h"
#include "tokenizer/tokenizer.h"
#include "vectors.h"

using namespace fovea;
using test::ids_str;

namespace {
const std::string kInternlm2Model = test::shared_dir() + "/data/tokenizers/internlm2/tokenizer.model";
}  // namespace

TEST(SentencePieceBpe, Internlm2Vectors) {
  if (!std::filesystem::exists(kInternlm2Model)) GTEST_SKIP() << "no ../shared";
  const auto tokenizer = load_tokenizer(kInternlm2Model);
  EXPECT_EQ(tokenizer->vocab_size(), 92544);
  const std::string dir = test::shared_dir() + "/data/tokenizers/vectors/";
  const auto cases = test::read_vectors(dir + "internlm2.inp", dir + "internlm2.out");
  ASSERT_EQ(cases.size(), 52u);
  for (const auto& c : cases) {
    EXPECT_EQ(ids_str(tokenizer->encode(c.text)), ids_str(c.ids)) << "text: [" << c.text << "]";
    EXPECT_EQ(tokenizer->decode(c.ids), c.text);
  }
}

TEST(SentencePieceBpe, Internlm2PiecesAndSpecials) {
  if (!std::filesystem::exists(kInternlm2Model)) GTEST_SKIP() << "no ../shared";
  const auto tokenizer = load_tokenizer(kInternlm2Model);
  EXPECT_EQ(tokenizer->token_id("<s>"), 1);
  EXPECT_EQ(tokenizer->token_id("</s>"), 2);
  EXPECT_EQ(tokenizer->token_id("<unk>"), 0);
  EXPECT_EQ(tokenizer->token_id("\xE2\x96\x81"), 262);
  EXPECT_EQ(tokenizer->token_id("no such piece"), -1);
  EXPECT_EQ(tokenizer->id_to_piece(3), "<0x00>");
  EXPECT_EQ(tokenizer->id_to_piece(354), std::string(1, '\0'));  // the NUL piece libsentencepiece 0.2 refuses
  // Control pieces are text unless the caller allows specials.
  EXPECT_EQ(tokenizer->encode("<s>", true), (std::vector<int32_t>{1}));
  EXPECT_NE(tokenizer->encode("<s>", false), (std::vector<int32_t>{1}));
  EXPECT_EQ(tokenizer->decode({1, 9843, 2}), "<s>Hello</s>");
  EXPECT_EQ(tokenizer->decode({1, 9843, 2}, true), "Hello");
  EXPECT_EQ(tokenizer->decode({92544, 9843, -1}), "Hello");  // unknown ids decode to nothing
  EXPECT_THROW(tokenizer->id_to_piece(92544), Error);
}

TEST(SentencePieceBpe, InvalidUtf8BecomesReplacementCharacters) {
  if (!std::filesystem::exists(kInternlm2Model)) GTEST_SKIP() << "no ../shared";
  const auto tokenizer = load_tokenizer(kInternlm2Model);
  // Each bad byte stands for U+FFFD, exactly as libsentencepiece's normaliser does.
  EXPECT_EQ(tokenizer->encode("a\xFF"
                              "b"),
            tokenizer->encode("a\xEF\xBF\xBD"
                              "b"));
  EXPECT_EQ(tokenizer->encode("\xE4\xB8"), tokenizer->encode("\xEF\xBF\xBD\xEF\xBF\xBD"));
  EXPECT_EQ(tokenizer->decode(tokenizer->encode("x\xC0y")), "x\xEF\xBF\xBDy");
  EXPECT_TRUE(tokenizer->encode("").empty());
  EXPECT_EQ(tokenizer->decode({}), "");
}

TEST(SentencePieceBpe, RejectsBrokenFiles) {
  const std::string dir = std::string(FOVEA_BINARY_DIR) + "/tokenizer_test_tmp";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/broken.model";
  {
    std::ofstream f(path, std::ios::binary);
    f << "\x0a\x7f"
      << "abc";  // a pieces field claiming 127 bytes, holding 3
  }
  EXPECT_THROW(load_tokenizer(path), Error);
  EXPECT_THROW(load_tokenizer(dir + "/missing.model"), Error);
  { std::ofstream f(path, std::ios::binary | std::ios::trunc); }
  EXPECT_THROW(load_tokenizer(path), Error);  // empty: no pieces
}

// Random texts (user-defined pieces, fullwidth letters, spaces, emoji...) with ids from libsentencepiece
// (golden files made by gen_fuzz_vectors.py).
TEST(SentencePieceBpe, Internlm2FuzzAgainstSentencePiece) {
  if (!std::filesystem::exists(kInternlm2Model)) GTEST_SKIP() << "no ../shared";
  const auto tokenizer = load_tokenizer(kInternlm2Model);
  const std::string dir = std::string(FOVEA_SOURCE_DIR) + "/tests/tokenizer/golden/";
  const auto cases = test::read_vectors(dir + "internlm2_fuzz.inp", dir + "internlm2_fuzz.out");
  ASSERT_EQ(cases.size(), 400u);
  for (const auto& c : cases)
    EXPECT_EQ(ids_str(tokenizer->encode(c.text)), ids_str(c.ids)) << "text: [" << c.text << "]";
}
