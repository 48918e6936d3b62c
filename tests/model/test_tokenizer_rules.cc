// BOS, EOS and the chat template from a checkpoint's tokenizer_config.json (model/tokenizer_rules.h and
// resolve_special_tokens), and the prompts they make. The ChatML expectations are what transformers'
// apply_chat_template renders with SmolLM2's and Qwen2's templates (quoted below from their tokenizer_config.json).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/special_tokens.h"
#include "model/tokenizer_rules.h"
#include "model/chat_template.h"
#include "support/temp_dir.h"
#include "tokenizer/tokenizer.h"

using namespace fovea;
namespace fs = std::filesystem;

namespace {

const char* kSmolLM2Template =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
// Qwen2-Instruct's, with the newline written as a Jinja escape.
const char* kQwen2Template =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou "
    "are a helpful assistant.<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\\n' }}{% endif %}";
// A ChatML template without a default system turn (InternVL3-hf style).
const char* kNoSystemTemplate =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n'}}{{ message['content'] }}"
    "{{'<|im_end|>\n'}}{% endfor %}{% if add_generation_prompt %}{{'<|im_start|>assistant\n'}}{% endif %}";

// Qwen3's (InternVL3.5's LLM), abbreviated: tools and the assistant turn's reasoning elided; the system turn only
// when the messages have one; <think></think> only when the caller passes enable_thinking=false.
const char* kQwen3Template =
    "{%- if tools %}{{- '<|im_start|>system\\n' }}{%- if messages[0].role == 'system' %}{{- messages[0].content + "
    "'\\n\\n' }}{%- endif %}{%- else %}{%- if messages[0].role == 'system' %}{{- '<|im_start|>system\\n' + "
    "messages[0].content + '<|im_end|>\\n' }}{%- endif %}{%- endif %}{%- for message in messages %}{%- if "
    "(message.role == \"user\") or (message.role == \"system\" and not loop.first) %}{{- '<|im_start|>' + "
    "message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}{%- elif message.role == \"assistant\" %}"
    "{{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content + '\\n</think>\\n\\n' + content }}"
    "{%- endif %}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- if "
    "enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
    "{%- endif %}";

class CheckpointTokenizerRules : public testing::Test {
 protected:
  // A tokenizer_config.json with SmolLM2's special tokens (ids 0-2) and InternVL's three, plus `extra` keys.
  void write_config(const nlohmann::json& extra) {
    nlohmann::json config = extra;
    const std::vector<std::pair<int, std::string>> added = {
        {0, "<|endoftext|>"}, {1, "<|im_start|>"}, {2, "<|im_end|>"}, {60, "<img>"}, {61, "</img>"}, {62, "<IMG_CONTEXT>"}};
    for (const auto& [id, content] : added) config["added_tokens_decoder"][std::to_string(id)] = {{"content", content}};
    dir_.write("tokenizer_config.json", config.dump());
  }
  ModelDesc resolve(CheckpointFormat format = CheckpointFormat::HfInternVL, bool template_named = false) {
    ModelDesc d;
    d.format = format;
    d.llm.arch = LlmArch::Llama;
    d.llm.vocab = 64;
    d.template_named = template_named;
    d.image_token_id = -1;  // no config.json image_token_id
    d.chat_template = ChatTemplateKind::InternVL2_5;
    resolve_special_tokens(dir_.string(), &d);
    return d;
  }
  test::TempDir dir_{"tokenizer_rules"};
};

}  // namespace

TEST_F(CheckpointTokenizerRules, BosFollowsAddBosToken) {
  write_config({{"add_bos_token", false}, {"bos_token", "<|im_start|>"}, {"eos_token", "<|im_end|>"}});
  ModelDesc d = resolve();
  EXPECT_EQ(d.bos_id, -1);  // a Llama without BOS: the old fixed rule gave id 1 (<|im_start|> here)
  EXPECT_EQ(d.eos_ids, (std::vector<int>{2}));
  write_config({{"add_bos_token", true}, {"bos_token", {{"content", "<|endoftext|>"}}}, {"eos_token", "<|endoftext|>"}});
  d = resolve();
  EXPECT_EQ(d.bos_id, 0);
  EXPECT_EQ(d.eos_ids, (std::vector<int>{2, 0}));
  write_config({{"add_bos_token", true}, {"bos_token", "<nope>"}});
  EXPECT_THROW(resolve(), Error);
  write_config({{"add_bos_token", "yes"}});
  EXPECT_THROW(resolve(), Error);
}

// Llama-3 tokenizers add <|begin_of_text|> through tokenizer.json's post_processor, not add_bos_token; a
// post_processor that adds nothing (SmolLM2's ByteLevel) means no BOS; add_bos_token, when given, wins.
TEST_F(CheckpointTokenizerRules, BosFromTheTokenizerJsonPostProcessor) {
  write_config(nlohmann::json::object());
  const nlohmann::json llama3 = {
      {"type", "Sequence"},
      {"processors",
       {{{"type", "ByteLevel"}},
        {{"type", "TemplateProcessing"},
         {"single", {{{"SpecialToken", {{"id", "<|endoftext|>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}}}}}}}}}};
  std::ofstream(dir_ / "tokenizer.json") << nlohmann::json{{"post_processor", llama3}}.dump();
  EXPECT_EQ(resolve().bos_id, 0);
  std::ofstream(dir_ / "tokenizer.json") << R"({"post_processor": {"type": "ByteLevel"}})";
  EXPECT_EQ(resolve().bos_id, -1);
  std::ofstream(dir_ / "tokenizer.json") << R"({"post_processor": null})";
  EXPECT_EQ(resolve().bos_id, 1);  // no rule at all: the arch's (<s>, here the fallback id)
  std::ofstream(dir_ / "tokenizer.json") << nlohmann::json{{"post_processor", llama3}}.dump();
  write_config({{"add_bos_token", false}});
  EXPECT_EQ(resolve().bos_id, -1);
}

TEST_F(CheckpointTokenizerRules, ModelChatTemplateAndItsSystemText) {
  write_config({{"chat_template", kSmolLM2Template}});
  ModelDesc d = resolve();
  EXPECT_EQ(d.chat_template, ChatTemplateKind::ChatML);
  EXPECT_EQ(d.template_system, std::optional<std::string>("You are a helpful AI assistant named SmolLM, trained by Hugging Face"));
  write_config({{"chat_template", kQwen2Template}});
  EXPECT_EQ(resolve().template_system, std::optional<std::string>("You are a helpful assistant."));
  write_config({{"chat_template", nlohmann::json::array({{{"name", "default"}, {"template", kNoSystemTemplate}}})}});
  d = resolve();
  EXPECT_EQ(d.chat_template, ChatTemplateKind::ChatML);
  EXPECT_FALSE(d.template_system.has_value());
  // A config that names its template keeps it; a non-ChatML template keeps InternVL2.5's.
  write_config({{"chat_template", kSmolLM2Template}});
  EXPECT_EQ(resolve(CheckpointFormat::HfInternVL, /*template_named=*/true).chat_template, ChatTemplateKind::InternVL2_5);
  write_config({{"chat_template", "{{ bos_token }}{% for m in messages %}<|start_header_id|>{% endfor %}"}});
  EXPECT_EQ(resolve().chat_template, ChatTemplateKind::InternVL2_5);
  // chat_template.jinja beside the config wins, as in transformers 5.
  write_config({{"chat_template", kSmolLM2Template}});
  std::ofstream(dir_ / "chat_template.jinja") << kQwen2Template;
  EXPECT_EQ(resolve().template_system, std::optional<std::string>("You are a helpful assistant."));
}

// InternVL3.5-HF ships Qwen3's template: ChatML turns, no default system text. Thinking is the user's to ask for
// (a system prompt, or /think in the question); Fovea writes no <think> block into the assistant prefix.
TEST_F(CheckpointTokenizerRules, Qwen3TemplateIsChatMLWithoutSystemOrThinkBlock) {
  write_config({{"chat_template", kQwen3Template}, {"eos_token", "<|im_end|>"}});
  const ModelDesc d = resolve();
  EXPECT_EQ(d.chat_template, ChatTemplateKind::ChatML);
  EXPECT_FALSE(d.template_system.has_value());
  EXPECT_EQ(d.eos_ids, (std::vector<int>{2}));
}

// The rendered prompt, through a real byte-level tokenizer with ChatML's specials: decode(build) is the text
// transformers' apply_chat_template gives for the same messages.
TEST_F(CheckpointTokenizerRules, ChatMLPromptMatchesTheTemplate) {
  const std::string golden = std::string(FOVEA_SOURCE_DIR) + "/tests/tokenizer/golden/missing_bytes.json";
  nlohmann::json spec = nlohmann::json::parse(std::ifstream(golden));
  const std::vector<std::string> specials = {"<|im_start|>", "<|im_end|>", "<img>", "</img>", "<IMG_CONTEXT>"};
  int next = 1000;
  for (const auto& s : specials) spec["added_tokens"].push_back({{"id", next++}, {"content", s}, {"special", true}});
  std::ofstream(dir_ / "tokenizer.json") << spec.dump();
  const auto tokenizer = load_tokenizer((dir_ / "tokenizer.json").string());
  ModelDesc d;
  d.chat_template = ChatTemplateKind::ChatML;
  d.bos_id = -1;
  d.image_token_id = 1004;
  d.img_start_id = 1002;
  d.img_end_id = 1003;
  d.template_system = "Be nice.";
  auto text = [&](const std::string& system, const std::string& user, std::vector<int> tiles) {
    return tokenizer->decode(build_chat_prompt(d, *tokenizer, system, user, tiles).ids);
  };
  EXPECT_EQ(text("", "hi", {}), "<|im_start|>system\nBe nice.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
                                "<|im_start|>assistant\n");
  EXPECT_EQ(text("Own.", "hi", {}), "<|im_start|>system\nOwn.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
                                    "<|im_start|>assistant\n");
  d.template_system.reset();
  const PromptIds with_image = build_chat_prompt(d, *tokenizer, "", "hi", {1});
  ASSERT_EQ(with_image.image_spans.size(), 1u);
  const auto [first, count] = with_image.image_spans[0];
  EXPECT_EQ(count, 256);
  EXPECT_EQ(with_image.ids[size_t(first) - 1], 1002);  // <img>
  EXPECT_EQ(with_image.ids[size_t(first)], 1004);
  std::string expected = "<|im_start|>user\n<img>";
  for (int i = 0; i < 256; ++i) expected += "<IMG_CONTEXT>";
  EXPECT_EQ(tokenizer->decode(with_image.ids), expected + "</img>\nhi<|im_end|>\n<|im_start|>assistant\n");
}

TEST_F(CheckpointTokenizerRules, Qwen3PromptHasNoThinkBlock) {
  const std::string golden = std::string(FOVEA_SOURCE_DIR) + "/tests/tokenizer/golden/missing_bytes.json";
  nlohmann::json spec = nlohmann::json::parse(std::ifstream(golden));
  int next = 1000;
  for (const std::string s : {"<|im_start|>", "<|im_end|>", "<think>", "</think>", "<img>", "</img>", "<IMG_CONTEXT>"})
    spec["added_tokens"].push_back({{"id", next++}, {"content", s}, {"special", true}});
  std::ofstream(dir_ / "tokenizer.json") << spec.dump();
  const auto tokenizer = load_tokenizer((dir_ / "tokenizer.json").string());
  write_config({{"chat_template", kQwen3Template}});
  ModelDesc d = resolve();
  d.bos_id = -1;
  const PromptIds prompt = build_chat_prompt(d, *tokenizer, "", "hi /think", {});
  EXPECT_EQ(tokenizer->decode(prompt.ids), "<|im_start|>user\nhi /think<|im_end|>\n<|im_start|>assistant\n");
  for (int32_t id : prompt.ids) EXPECT_TRUE(id != 1002 && id != 1003) << "a <think> token in the prompt";
}
