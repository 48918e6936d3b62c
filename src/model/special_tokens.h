// The ids of <img>, </img>, <IMG_CONTEXT>, BOS and the stop tokens. They live in the tokenizer files beside the
// weights (tokenizer_config.json's added_tokens_decoder, added_tokens.json), not in config.json (except the -hf
// image_token_id); the real InternVL2 ids are the fallback when a checkpoint directory has no such file.
#pragma once
#include <map>
#include <string>

#include "model/model_desc.h"

namespace fovea {

// content -> id from `dir`/tokenizer_config.json (added_tokens_decoder) and `dir`/added_tokens.json.
std::map<std::string, int> read_added_token_ids(const std::string& dir);

// Fills image_token_id, img_start_id, img_end_id, bos_id and eos_ids of `desc` (arch and vocab already set).
// The stop tokens follow InternVL's chat(): <|im_end|>, plus tokenizer_config's eos_token or else </s>
// (InternLM2/Llama) / <|endoftext|> (Qwen2). BOS: tokenizer_config's add_bos_token / bos_token when the key is
// there, else <s> except for Qwen2. A -hf checkpoint whose config names no template gets its own ChatML chat
// template when it has one (model/tokenizer_rules.h).
void resolve_special_tokens(const std::string& dir, ModelDesc* desc);

}  // namespace fovea
