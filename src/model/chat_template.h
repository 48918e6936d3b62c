// InternVL chat prompts: the template text around the user's turn, with each image expanded to
// <img> + <IMG_CONTEXT> × (tokens_per_tile · tiles) + </img>.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/model_desc.h"
#include "tokenizer/tokenizer.h"

namespace fovea {

struct PromptIds {
  std::vector<int32_t> ids;
  // For each image, in order: index in `ids` of its first <IMG_CONTEXT> token and how many follow.
  std::vector<std::pair<int32_t, int32_t>> image_spans;
};

// Builds the token ids of a single-turn chat: system (empty -> the template's default; none for a ChatML template
// that writes none), then the user turn with
// the images first (one "<image>" placeholder each, as InternVL's chat() does), then the question, then the
// assistant prefix. Template text is parsed with special tokens; user text never is.
PromptIds build_chat_prompt(const ModelDesc& desc, const Tokenizer& tokenizer, const std::string& system,
                            const std::string& user_text, const std::vector<int>& image_tiles);

// The default system text of a template. Hermes-2 shares internlm2-chat's InternVL2 sentence: InternVL's
// conversation.py gives it that system_message and the model's chat() uses its template's.
std::string default_system_prompt(ChatTemplateKind kind);

}  // namespace fovea
