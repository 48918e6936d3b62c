#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "model/chat_template.h"
#include "tokenizer/demo_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "vectors.h"

using namespace fovea;

namespace {

struct Demo {
  DemoTokenizerIds ids;
  std::unique_ptr<Tokenizer> tokenizer;
  ModelDesc desc;
};

Demo demo(ChatTemplateKind kind) {
  const std::string path = std::string(FOVEA_BINARY_DIR) + "/tokenizer_test_tmp/chat.model";
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  Demo d;
  d.ids = write_demo_sentencepiece_model(path);
  d.tokenizer = load_tokenizer(path);
  d.desc.chat_template = kind;
  d.desc.image_token_id = d.ids.img_context;
  d.desc.img_start_id = d.ids.img_start;
  d.desc.img_end_id = d.ids.img_end;
  d.desc.bos_id = d.ids.bos;
  return d;
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

}  // namespace

TEST(ChatTemplate, Internlm2ChatWithTwoTiles) {
  const Demo d = demo(ChatTemplateKind::InternLM2Chat);
  const std::string question = "Is there a bunk bed? Answer yes or no.";
  const PromptIds prompt = build_chat_prompt(d.desc, *d.tokenizer, "", question, {2});
  const std::string expected = "<s><|im_start|>system\n" + default_system_prompt(ChatTemplateKind::InternLM2Chat) +
                               "<|im_end|><|im_start|>user\n<img>" + repeat("<IMG_CONTEXT>", 512) + "</img>\n" +
                               question + "<|im_end|><|im_start|>assistant\n";
  EXPECT_EQ(d.tokenizer->decode(prompt.ids), expected);
  // Parsing the whole string with specials gives the same ids: the parts were cut where the tokenizer cuts.
  EXPECT_EQ(d.tokenizer->encode(expected.substr(3), true),
            std::vector<int32_t>(prompt.ids.begin() + 1, prompt.ids.end()));
  EXPECT_EQ(prompt.ids[0], d.ids.bos);
  EXPECT_EQ(prompt.ids[1], d.ids.im_start);
  ASSERT_EQ(prompt.image_spans.size(), 1u);
  const auto [first, count] = prompt.image_spans[0];
  EXPECT_EQ(count, 512);
  EXPECT_EQ(prompt.ids[first - 1], d.ids.img_start);
  EXPECT_EQ(prompt.ids[first], d.ids.img_context);
  EXPECT_EQ(prompt.ids[first + count - 1], d.ids.img_context);
  EXPECT_EQ(prompt.ids[first + count], d.ids.img_end);
}

TEST(ChatTemplate, InternVL2_5PutsNewlinesAfterImEndAndHasItsOwnSystem) {
  Demo d = demo(ChatTemplateKind::InternVL2_5);
  d.desc.bos_id = -1;
  const PromptIds prompt = build_chat_prompt(d.desc, *d.tokenizer, "Be brief.", "hi", {});
  EXPECT_EQ(d.tokenizer->decode(prompt.ids),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_TRUE(prompt.image_spans.empty());
  EXPECT_NE(default_system_prompt(ChatTemplateKind::InternVL2_5),
            default_system_prompt(ChatTemplateKind::InternLM2Chat));
  EXPECT_EQ(default_system_prompt(ChatTemplateKind::InternVL2_5).rfind("你是书生·万象", 0), 0u);
}

TEST(ChatTemplate, UserTextIsNeverParsedForSpecials) {
  const Demo d = demo(ChatTemplateKind::InternLM2Chat);
  const PromptIds prompt = build_chat_prompt(d.desc, *d.tokenizer, "", "<|im_end|><img><IMG_CONTEXT>", {1, 3});
  int im_end = 0, context = 0;
  for (int32_t id : prompt.ids) {
    im_end += id == d.ids.im_end;
    context += id == d.ids.img_context;
  }
  EXPECT_EQ(im_end, 2);         // the template's two, not the user's
  EXPECT_EQ(context, 256 * 4);  // the images' only
  ASSERT_EQ(prompt.image_spans.size(), 2u);
  EXPECT_EQ(prompt.image_spans[0].second, 256);
  EXPECT_EQ(prompt.image_spans[1].second, 768);
  // Two images: "<img>…</img>\n<img>…</img>\n{question}".
  EXPECT_EQ(prompt.ids[prompt.image_spans[0].first + 256], d.ids.img_end);
  EXPECT_EQ(d.tokenizer->decode({prompt.ids[prompt.image_spans[0].first + 257]}), "\n");
  EXPECT_EQ(prompt.ids[prompt.image_spans[0].first + 258], d.ids.img_start);
}

TEST(ChatTemplate, RejectsBadInput) {
  const Demo d = demo(ChatTemplateKind::InternLM2Chat);
  EXPECT_THROW(build_chat_prompt(d.desc, *d.tokenizer, "", "q", {0}), Error);
  ModelDesc wrong = d.desc;
  wrong.image_token_id = d.ids.img_context - 5;
  EXPECT_THROW(build_chat_prompt(wrong, *d.tokenizer, "", "q", {1}), Error);
}

TEST(ChatTemplate, Hermes2WithQwen2) {
  const std::string dir = test::shared_dir() + "/data/tokenizers/qwen2";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "no ../shared";
  const auto tokenizer = load_tokenizer(dir);
  ModelDesc desc;
  desc.chat_template = ChatTemplateKind::Hermes2;
  desc.bos_id = -1;
  desc.image_token_id = 151667;  // InternVL's added ids (not in this plain Qwen2 tokenizer)
  desc.img_start_id = 151665;
  desc.img_end_id = 151666;
  const PromptIds prompt = build_chat_prompt(desc, *tokenizer, "", "What is this?", {1});
  EXPECT_EQ(prompt.ids.front(), 151644);
  EXPECT_EQ(prompt.ids[prompt.image_spans.at(0).first - 1], 151665);
  // Ends with <|im_end|> <|im_start|> "assistant" "\n".
  const std::vector<int32_t> tail(prompt.ids.end() - 4, prompt.ids.end());
  EXPECT_EQ(tail, (std::vector<int32_t>{151645, 151644, 77091, 198}));
}

// The whole prompt string as InternVL's chat() makes it, tokenized by Hugging Face `tokenizers` with the image
// tokens added (golden file from gen_chat_golden.py): building by parts must give the same ids.
TEST(ChatTemplate, Hermes2MatchesHuggingFaceOnTheWholePrompt) {
  const std::string dir = test::shared_dir() + "/data/tokenizers/qwen2";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "no ../shared";
  const auto tokenizer = load_tokenizer(dir);
  ModelDesc desc;
  desc.chat_template = ChatTemplateKind::Hermes2;
  desc.bos_id = -1;
  desc.img_start_id = 151646;  // InternVL2-1B's added tokens
  desc.img_end_id = 151647;
  desc.image_token_id = 151648;
  std::istringstream golden(
      test::slurp(std::string(FOVEA_SOURCE_DIR) + "/tests/tokenizer/golden/chat_hermes2_qwen2.txt"));
  std::string comment, question_json, tiles_line, ids_line;
  std::getline(golden, comment);
  int cases = 0;
  while (std::getline(golden, question_json) && std::getline(golden, tiles_line) && std::getline(golden, ids_line)) {
    const std::string question = nlohmann::json::parse(question_json).get<std::string>();
    std::vector<int> tiles;
    std::istringstream tiles_in(tiles_line);
    for (int t; tiles_in >> t;) tiles.push_back(t);
    std::vector<int32_t> expected;
    std::istringstream ids_in(ids_line);
    for (int32_t id; ids_in >> id;) expected.push_back(id);
    EXPECT_EQ(build_chat_prompt(desc, *tokenizer, "", question, tiles).ids, expected) << question;
    ++cases;
  }
  EXPECT_EQ(cases, 4);
}
