// The InternVL chat templates (internvl_chat/internvl/conversation.py, separator style MPT):
//   <|im_start|>system\n{system}{sep}<|im_start|>user\n{question}{sep}<|im_start|>assistant\n
// with sep = "<|im_end|>" (internlm2-chat, Hermes-2) or "<|im_end|>\n" (internvl2_5), and chat()'s question
// "<image>\n{user text}" whose <image> becomes <img><IMG_CONTEXT>×(256·tiles)</img>.
// ChatML (a -hf checkpoint's own template, e.g. SmolLM2's): the same turns with sep = "<|im_end|>\n", the
// template's default system text (ModelDesc::template_system), and no system turn where the template writes none.
//
// The prompt is built as parts rather than as one string to parse: special tokens go in as ids, and each run of
// plain text between two of them is encoded on its own — which is exactly what a tokenizer that splits added
// tokens out first does with the full prompt string, without ever parsing the caller's text for specials.
#include "model/chat_template.h"

#include "core/error.h"

namespace fovea {
namespace {

constexpr const char* kInternVL2System =
    "你是由上海人工智能实验室联合商汤科技开发的书生多模态大模型，英文名叫InternVL, 是一个有用无害的人工智能助手。";
constexpr const char* kInternVL2_5System =
    "你是书生·万象，英文名是InternVL，是由上海人工智能实验室、清华大学及多家合作单位联合开发的多模态大语言模型。";

int32_t required_token(const Tokenizer& tokenizer, const char* text) {
  const int32_t id = tokenizer.token_id(text);
  FOVEA_CHECK(id >= 0, "the tokenizer has no ", text, " token, which the chat template needs");
  return id;
}

class PromptBuilder {
 public:
  explicit PromptBuilder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  void text(const std::string& plain) { pending_ += plain; }
  void token(int32_t id) {
    flush();
    prompt_.ids.push_back(id);
  }
  void image(int32_t start, int32_t context, int32_t end, int32_t context_count) {
    token(start);
    prompt_.image_spans.emplace_back(int32_t(prompt_.ids.size()), context_count);
    prompt_.ids.insert(prompt_.ids.end(), size_t(context_count), context);
    token(end);
  }
  PromptIds finish() {
    flush();
    return std::move(prompt_);
  }

 private:
  void flush() {
    if (pending_.empty()) return;
    const std::vector<int32_t> ids = tokenizer_.encode(pending_, /*allow_special=*/false);
    prompt_.ids.insert(prompt_.ids.end(), ids.begin(), ids.end());
    pending_.clear();
  }
  const Tokenizer& tokenizer_;
  std::string pending_;
  PromptIds prompt_;
};

}  // namespace

std::string default_system_prompt(ChatTemplateKind kind) {
  FOVEA_CHECK(kind != ChatTemplateKind::ChatML, "a model's own template keeps its system text in ModelDesc");
  // Hermes-2 (InternVL2-1B/-4B... with Qwen2) uses the same InternVL2 sentence as internlm2-chat: the model's
  // system_message is its template's, and conversation.py gives Hermes-2 this text.
  return kind == ChatTemplateKind::InternVL2_5 ? kInternVL2_5System : kInternVL2System;
}

PromptIds build_chat_prompt(const ModelDesc& desc, const Tokenizer& tokenizer, const std::string& system,
                            const std::string& user_text, const std::vector<int>& image_tiles) {
  const int32_t im_start = required_token(tokenizer, "<|im_start|>");
  const int32_t im_end = required_token(tokenizer, "<|im_end|>");
  const int32_t known_context = tokenizer.token_id("<IMG_CONTEXT>");
  FOVEA_CHECK(image_tiles.empty() || known_context < 0 || known_context == desc.image_token_id,
              "config image token id ", desc.image_token_id, " is not the tokenizer's <IMG_CONTEXT> (", known_context,
              ")");
  const bool own_template = desc.chat_template == ChatTemplateKind::ChatML;
  const std::string after_end =
      desc.chat_template == ChatTemplateKind::InternVL2_5 || own_template ? "\n" : "";
  const int tokens_per_tile = desc.vision.tokens_per_tile();

  PromptBuilder prompt(tokenizer);
  if (desc.bos_id >= 0) prompt.token(desc.bos_id);
  const std::optional<std::string> system_text =
      !system.empty() ? system : own_template ? desc.template_system : default_system_prompt(desc.chat_template);
  if (system_text) {
    prompt.token(im_start);
    prompt.text("system\n" + *system_text);
    prompt.token(im_end);
    prompt.text(after_end);
  }
  prompt.token(im_start);
  prompt.text("user\n");
  for (const int tiles : image_tiles) {
    FOVEA_CHECK(tiles >= 1, "an image needs at least one tile, got ", tiles);
    prompt.image(desc.img_start_id, desc.image_token_id, desc.img_end_id, tokens_per_tile * tiles);
    prompt.text("\n");
  }
  prompt.text(user_text);
  prompt.token(im_end);
  prompt.text(after_end);
  prompt.token(im_start);
  prompt.text("assistant\n");
  return prompt.finish();
}

}  // namespace fovea
