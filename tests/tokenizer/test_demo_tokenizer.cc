#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "tokenizer/demo_tokenizer.h"
#include "tokenizer/sentencepiece_bpe.h"
#include "tokenizer/sp_model_proto.h"
#include "tokenizer/tokenizer.h"

using namespace fovea;

namespace {
std::string temp_dir() {
  const std::string dir = std::string(FOVEA_BINARY_DIR) + "/tokenizer_test_tmp/demo";
  std::filesystem::create_directories(dir);
  return dir;
}
}  // namespace

TEST(DemoTokenizer, WritesALoadableInternlm2StyleModel) {
  const std::string path = temp_dir() + "/tokenizer.model";
  const DemoTokenizerIds ids = write_demo_sentencepiece_model(path);
  const auto tokenizer = load_tokenizer(path);
  EXPECT_EQ(tokenizer->vocab_size(), ids.vocab_size);
  EXPECT_GT(ids.vocab_size, 259 + 300);  // specials + bytes + a few hundred learned pieces
  EXPECT_EQ(ids.img_context, ids.vocab_size - 1);
  EXPECT_EQ(ids.img_end, ids.vocab_size - 2);
  EXPECT_EQ(ids.img_start, ids.vocab_size - 3);
  EXPECT_EQ(tokenizer->token_id("<IMG_CONTEXT>"), ids.img_context);
  EXPECT_EQ(tokenizer->token_id("<img>"), ids.img_start);
  EXPECT_EQ(tokenizer->token_id("</img>"), ids.img_end);
  EXPECT_EQ(tokenizer->token_id("<|im_start|>"), ids.im_start);
  EXPECT_EQ(tokenizer->token_id("<|im_end|>"), ids.im_end);
  EXPECT_EQ(tokenizer->token_id("<s>"), ids.bos);
  EXPECT_EQ(tokenizer->token_id("</s>"), ids.eos);
  EXPECT_EQ(tokenizer->id_to_piece(3), "<0x00>");
  EXPECT_EQ(tokenizer->id_to_piece(258), "<0xFF>");
}

TEST(DemoTokenizer, IsDeterministicAndRoundTrips) {
  const std::string a = serialize_sp_model(build_demo_sentencepiece_model());
  const std::string b = serialize_sp_model(build_demo_sentencepiece_model());
  EXPECT_EQ(a, b);
  const std::string path = temp_dir() + "/tokenizer.model";
  write_demo_sentencepiece_model(path);
  const auto tokenizer = load_tokenizer(path);
  for (const std::string text : {"Is there a bunk bed in this room? Answer yes or no.", "图中有几张床？",
                                 "  two  spaces\nand a newline", "unseen ✓ émoji 😀", ""}) {
    const auto ids = tokenizer->encode(text);
    EXPECT_EQ(tokenizer->decode(ids), text);
  }
  // Learned pieces make common words short; unseen characters fall back to bytes.
  EXPECT_LT(tokenizer->encode("Is there a bunk bed in this room?").size(), 16u);
  EXPECT_EQ(tokenizer->encode("\xF0\x9F\x98\x80").size(), 4u);
}

TEST(DemoTokenizer, SpecialsOnlyWhenAllowed) {
  const std::string path = temp_dir() + "/tokenizer.model";
  const DemoTokenizerIds ids = write_demo_sentencepiece_model(path);
  const auto tokenizer = load_tokenizer(path);
  const auto with = tokenizer->encode("<|im_start|>user\n<img><IMG_CONTEXT></img>", true);
  ASSERT_GE(with.size(), 5u);
  EXPECT_EQ(with.front(), ids.im_start);
  EXPECT_EQ(with[with.size() - 3], ids.img_start);
  EXPECT_EQ(with[with.size() - 2], ids.img_context);
  EXPECT_EQ(with.back(), ids.img_end);
  const auto without = tokenizer->encode("<|im_start|>user", false);
  for (int32_t id : without) EXPECT_NE(id, ids.im_start);
  EXPECT_EQ(tokenizer->decode(without), "<|im_start|>user");
  EXPECT_EQ(tokenizer->decode(with, true), "user\n");
}

// Damaged model files either load or throw fovea::Error — never crash (run under ASan in sanitizer builds).
TEST(DemoTokenizer, DamagedModelBytesThrowOrLoad) {
  const std::string good = serialize_sp_model(build_demo_sentencepiece_model());
  uint32_t state = 12345;
  const auto next = [&] { return state = state * 1664525u + 1013904223u; };
  int loaded = 0, thrown = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::string bytes = good;
    if (trial % 3 == 0) bytes.resize(next() % bytes.size());
    for (int flips = 1 + trial % 4; flips > 0; --flips) bytes[next() % bytes.size()] = char(next());
    try {
      SpModelProto model = parse_sp_model(bytes);
      if (model.pieces.empty()) throw Error("no pieces");
      SentencePieceBpe tokenizer(std::move(model), {});
      tokenizer.decode(tokenizer.encode("Is there a bunk bed? 图中有床 😀"));
      ++loaded;
    } catch (const Error&) {
      ++thrown;
    }
  }
  EXPECT_EQ(loaded + thrown, 300);
  EXPECT_GT(thrown, 0);
}
