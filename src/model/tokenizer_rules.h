// What a checkpoint's tokenizer_config.json (and chat_template.jinja) say about prompts: whether a BOS token is
// added and which, the EOS token, and the chat template. Hugging Face checkpoints carry these per model, so a
// Llama-architecture LLM may well have no BOS (SmolLM2) or a ChatML template with its own system prompt.
#pragma once
#include <optional>
#include <string>

#include "model/model_desc.h"

namespace fovea {

struct TokenizerRules {
  std::optional<bool> add_bos;  // tokenizer_config's add_bos_token, when present
  std::string bos_token;        // bos_token's content ("" when absent or null)
  // tokenizer.json's post_processor, when there is one: the special token its TemplateProcessing puts before a
  // single sequence ("" when it adds none). How Llama-3 tokenizers add <|begin_of_text|> without add_bos_token.
  std::optional<std::string> post_processor_bos;
  std::string eos_token;
  std::string chat_template;  // chat_template.jinja, else tokenizer_config's chat_template ("default" of a list)
};

// Missing files and keys leave the fields empty; a malformed file or key throws naming it.
TokenizerRules read_tokenizer_rules(const std::string& dir);

// The model's own template, for -hf checkpoints whose config.json names none: a ChatML template
// (<|im_start|>role\n...<|im_end|>\n turns, as SmolLM2's, Qwen2's) becomes ChatTemplateKind::ChatML with its
// default system text, if it writes one, in desc->template_system. Any other template, or none, leaves
// desc->chat_template as it is (InternVL2.5's, what InternVL's -hf conversions use); returns whether it matched.
bool use_model_chat_template(const TokenizerRules& rules, ModelDesc* desc);

}  // namespace fovea
