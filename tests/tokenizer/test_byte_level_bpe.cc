#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/tokenizer.h"
#include "vectors.h"

using namespace fovea;
using test::ids_str;

namespace {
const std::string kQwen2Dir = test::shared_dir() + "/data/tokenizers/qwen2";

const Tokenizer& qwen2() {
  static const auto tokenizer = load_tokenizer(kQwen2Dir);
  return *tokenizer;
}
}  // namespace

TEST(ByteLevelBpe, Qwen2Vectors) {
  if (!std::filesystem::exists(kQwen2Dir)) GTEST_SKIP() << "no ../shared";
  const std::string dir = test::shared_dir() + "/data/tokenizers/vectors/";
  const auto cases = test::read_vectors(dir + "qwen2.gguf.inp", dir + "qwen2.gguf.out");
  ASSERT_EQ(cases.size(), 46u);
  for (const auto& c : cases) {
    EXPECT_EQ(ids_str(qwen2().encode(c.text)), ids_str(c.ids)) << "text: [" << c.text << "]";
    EXPECT_EQ(qwen2().decode(c.ids), c.text);
  }
}

TEST(ByteLevelBpe, Qwen2SpecialTokens) {
  if (!std::filesystem::exists(kQwen2Dir)) GTEST_SKIP() << "no ../shared";
  const Tokenizer& t = qwen2();
  EXPECT_EQ(t.vocab_size(), 151646);
  EXPECT_EQ(t.token_id("<|im_start|>"), 151644);
  EXPECT_EQ(t.token_id("<|im_end|>"), 151645);
  EXPECT_EQ(t.token_id("<|endoftext|>"), 151643);
  EXPECT_EQ(t.encode("<|im_start|>user\nhi<|im_end|>", true).front(), 151644);
  EXPECT_EQ(t.encode("<|im_start|>user\nhi<|im_end|>", true).back(), 151645);
  const auto plain = t.encode("<|im_start|>", false);
  EXPECT_GT(plain.size(), 1u);
  EXPECT_EQ(t.decode(plain), "<|im_start|>");
  EXPECT_EQ(t.decode({151644, 151645}, true), "");
  EXPECT_EQ(t.decode({151644}), "<|im_start|>");
  EXPECT_EQ(t.decode({151646, 9707, -3}), "Hello");  // unknown ids decode to nothing
  EXPECT_THROW(t.id_to_piece(151646), Error);
}

TEST(ByteLevelBpe, Qwen2NormalisesToNfc) {
  if (!std::filesystem::exists(kQwen2Dir)) GTEST_SKIP() << "no ../shared";
  // "é" written decomposed (e + U+0301) encodes like the precomposed character.
  EXPECT_EQ(qwen2().encode("caf\x65\xCC\x81"), qwen2().encode("caf\xC3\xA9"));
}

TEST(ByteLevelBpe, Qwen2InvalidUtf8AndEmpty) {
  if (!std::filesystem::exists(kQwen2Dir)) GTEST_SKIP() << "no ../shared";
  EXPECT_TRUE(qwen2().encode("").empty());
  EXPECT_EQ(qwen2().decode({}), "");
  EXPECT_EQ(qwen2().encode("a\xFF"
                           "b"),
            qwen2().encode("a\xEF\xBF\xBD"
                           "b"));
  // A lone byte token (the first byte of "中") decodes to U+FFFD, the whole sequence to the character.
  const auto ids = qwen2().encode("\xE4\xB8\xAD\xE4\xB8\xAD\xE4\xB8\xAD\xF0\x9F\x98\x80");
  EXPECT_EQ(qwen2().decode(ids), "\xE4\xB8\xAD\xE4\xB8\xAD\xE4\xB8\xAD\xF0\x9F\x98\x80");
}

// Random texts aimed at the regex, NFC and contraction edge cases, with ids from Hugging Face `tokenizers`
// (golden files made by gen_fuzz_vectors.py).
TEST(ByteLevelBpe, Qwen2FuzzAgainstHuggingFace) {
  if (!std::filesystem::exists(kQwen2Dir)) GTEST_SKIP() << "no ../shared";
  const std::string dir = std::string(FOVEA_SOURCE_DIR) + "/tests/tokenizer/golden/";
  const auto cases = test::read_vectors(dir + "qwen2_fuzz.inp", dir + "qwen2_fuzz.out");
  ASSERT_EQ(cases.size(), 410u);  // the last 10 are single pieces over 64 bytes (the heap merge path)
  for (const auto& c : cases) EXPECT_EQ(ids_str(qwen2().encode(c.text)), ids_str(c.ids)) << "text: [" << c.text << "]";
}

TEST(ByteLevelBpe, StreamDecoderHoldsPartialCharacters) {
  if (!std::filesystem::exists(kQwen2Dir)) GTEST_SKIP() << "no ../shared";
  // Rare CJK characters and emoji are split over several byte-level tokens.
  const std::string text = "罕见字：龘靐齉 😀👍🏽 done";
  const auto ids = qwen2().encode(text);
  ASSERT_GT(ids.size(), 8u);
  StreamDecoder stream(qwen2());
  std::string joined;
  bool held_back = false;
  for (int32_t id : ids) {
    const std::string piece = stream.push(id);
    held_back = held_back || piece.empty();
    joined += piece;
    EXPECT_EQ(qwen2().decode(qwen2().encode(piece)), piece);  // only whole characters come out
  }
  joined += stream.flush();
  EXPECT_EQ(joined, text);
  EXPECT_TRUE(held_back);
}

// Found by fuzz_vocab_merges: one huge id in vocab.json sized the id -> piece tables at gigabytes. A vocab whose
// ids leave more than 2^20 unused is refused with the piece and id named; a dense one with reserved gaps loads.
TEST(ByteLevelBpe, RefusesAVocabWhoseIdsAreFarFromDense) {
  ByteLevelBpeSpec huge;
  huge.vocab = {{"a", 0}, {"b", 1}, {"c", 100'000'000}};
  try {
    ByteLevelBpe bpe(std::move(huge));
    FAIL() << "a vocab with id 100000000 among 3 pieces loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("piece 'c' has id 100000000"), std::string::npos) << e.what();
  }
  ByteLevelBpeSpec added;
  added.vocab = {{"a", 0}, {"b", 1}};
  added.added.push_back({"<huge>", 2147483647, true});
  EXPECT_THROW(ByteLevelBpe{std::move(added)}, Error);
  ByteLevelBpeSpec gaps;
  gaps.vocab = {{"a", 0}, {"b", 1}, {"c", 1000}};
  const ByteLevelBpe bpe(std::move(gaps));
  EXPECT_EQ(bpe.vocab_size(), 1001);
}
