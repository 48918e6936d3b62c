#include <gtest/gtest.h>

#include <filesystem>

#include "tokenizer/demo_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

using namespace fovea;

TEST(Utf8, SanitizeReplacesEachBadByte) {
  EXPECT_EQ(utf8::sanitize("abc"), "abc");
  EXPECT_EQ(utf8::sanitize("\xC3\xA9"), "\xC3\xA9");
  EXPECT_EQ(utf8::sanitize("\xFF"), "\xEF\xBF\xBD");
  EXPECT_EQ(utf8::sanitize("\xC0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");                  // overlong NUL
  EXPECT_EQ(utf8::sanitize("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(utf8::sanitize("\xE4\xB8"), "\xEF\xBF\xBD\xEF\xBF\xBD");                  // truncated
  EXPECT_EQ(utf8::sanitize("\xF4\x90\x80\x80").size(), 12u);                          // above U+10FFFF
}

TEST(Utf8, IncompleteTail) {
  EXPECT_EQ(utf8::incomplete_tail_length("a"), 0u);
  EXPECT_EQ(utf8::incomplete_tail_length("a\xE4"), 1u);
  EXPECT_EQ(utf8::incomplete_tail_length("a\xE4\xB8"), 2u);
  EXPECT_EQ(utf8::incomplete_tail_length("a\xE4\xB8\xAD"), 0u);
  EXPECT_EQ(utf8::incomplete_tail_length("\xF0\x9F\x98"), 3u);
  EXPECT_EQ(utf8::incomplete_tail_length("\xFF"), 0u);      // never completes
  EXPECT_EQ(utf8::incomplete_tail_length("\xE0\x80"), 0u);  // overlong start: already invalid
}

TEST(StreamDecoder, JoinsByteFallbackPiecesAcrossTokens) {
  const std::string path = std::string(FOVEA_BINARY_DIR) + "/tokenizer_test_tmp/stream.model";
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  const DemoTokenizerIds demo = write_demo_sentencepiece_model(path);
  const auto tokenizer = load_tokenizer(path);
  const std::string text = "bed 😀 床 ✓ done";
  std::vector<int32_t> ids = tokenizer->encode(text);
  ids.push_back(demo.im_end);
  StreamDecoder stream(*tokenizer);  // skips specials by default
  std::string joined;
  int empty_pushes = 0;
  for (int32_t id : ids) {
    const std::string piece = stream.push(id);
    EXPECT_EQ(utf8::sanitize(piece), piece) << "a push emitted a partial character";
    empty_pushes += piece.empty();
    joined += piece;
  }
  joined += stream.flush();
  EXPECT_EQ(joined, text);
  EXPECT_GT(empty_pushes, 0);  // the emoji's first byte pieces were held back
}

TEST(StreamDecoder, FlushReplacesAnUnfinishedCharacter) {
  const std::string path = std::string(FOVEA_BINARY_DIR) + "/tokenizer_test_tmp/stream.model";
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  write_demo_sentencepiece_model(path);
  const auto tokenizer = load_tokenizer(path);
  StreamDecoder stream(*tokenizer);
  EXPECT_EQ(stream.push(tokenizer->token_id("<0xE4>")), "");
  EXPECT_EQ(stream.push(tokenizer->token_id("<0xB8>")), "");
  EXPECT_EQ(stream.flush(), "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(StreamDecoder, LongStreamEqualsOneShotDecode) {
  const std::string path = std::string(FOVEA_BINARY_DIR) + "/tokenizer_test_tmp/stream.model";
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  write_demo_sentencepiece_model(path);
  const auto tokenizer = load_tokenizer(path);
  std::string text;
  for (int i = 0; i < 200; ++i) text += "bed 床 😀 " + std::to_string(i) + "\n";
  const auto ids = tokenizer->encode(text);
  StreamDecoder stream(*tokenizer);
  std::string joined;
  for (int32_t id : ids) joined += stream.push(id);
  joined += stream.flush();
  EXPECT_EQ(joined, tokenizer->decode(ids, true));
  EXPECT_EQ(joined, text);
}
