#include "model/special_tokens.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/tokenizer_rules.h"

namespace fovea {
namespace fs = std::filesystem;
namespace {

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  FOVEA_CHECK(in, "cannot read ", path.string());
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    FOVEA_FAIL(path.string(), ": bad JSON: ", e.what());
  }
}

struct KnownIds {  // the real tokenizers' ids (REFERENCE.md)
  int img_start, img_end, img_context, im_end, second_stop, bos;
  const char* second_stop_name;
};
constexpr KnownIds kInternLM2{92544, 92545, 92546, 92542, 2, 1, "</s>"};
constexpr KnownIds kQwen2{151665, 151666, 151667, 151645, 151643, -1, "<|endoftext|>"};

}  // namespace

std::map<std::string, int> read_added_token_ids(const std::string& dir) {
  std::map<std::string, int> ids;
  const fs::path config = fs::path(dir) / "tokenizer_config.json";
  if (fs::exists(config)) {
    const nlohmann::json json = read_json(config);
    if (json.contains("added_tokens_decoder")) {
      FOVEA_CHECK(json["added_tokens_decoder"].is_object(), config.string(), ": added_tokens_decoder is not an object");
      for (const auto& [id_text, entry] : json["added_tokens_decoder"].items()) {
        FOVEA_CHECK(entry.is_object() && entry.contains("content") && entry["content"].is_string(), config.string(),
                    ": added token ", id_text, " has no content");
        int id = -1;
        try {
          id = std::stoi(id_text);
        } catch (const std::exception&) {
          FOVEA_FAIL(config.string(), ": added token id '", id_text, "' is not a number");
        }
        ids[entry["content"].get<std::string>()] = id;
      }
    }
  }
  const fs::path added = fs::path(dir) / "added_tokens.json";
  if (fs::exists(added)) {
    const nlohmann::json json = read_json(added);
    FOVEA_CHECK(json.is_object(), added.string(), ": not an object");
    for (const auto& [content, id] : json.items()) {
      FOVEA_CHECK(id.is_number_integer(), added.string(), ": id of ", content, " is not an integer");
      ids.emplace(content, id.get<int>());  // tokenizer_config.json wins
    }
  }
  return ids;
}

void resolve_special_tokens(const std::string& dir, ModelDesc* d) {
  const std::map<std::string, int> added = read_added_token_ids(dir);
  const bool qwen = d->llm.arch == LlmArch::Qwen2 || d->llm.arch == LlmArch::Qwen3;
  const KnownIds& known = qwen ? kQwen2 : kInternLM2;
  // An original-format Llama backbone (InternVL2-Llama3, InternVL2-40B's Yi) has a tokenizer unlike either, and
  // Qwen3's vocabulary puts InternVL's tokens past its own added ones (<think>, ...): no fallback ids.
  const bool may_fall_back = !(d->llm.arch == LlmArch::Llama && d->format == CheckpointFormat::InternVLChat) &&
                             d->llm.arch != LlmArch::Qwen3;
  auto lookup = [&](const std::string& content, int fallback) {
    const auto it = added.find(content);
    if (it != added.end()) return it->second;
    FOVEA_CHECK(may_fall_back, dir, ": cannot find the id of ", content,
                " (no tokenizer_config.json / added_tokens.json entry)");
    return fallback;
  };
  d->img_start_id = lookup("<img>", known.img_start);
  d->img_end_id = lookup("</img>", known.img_end);
  const int context = lookup("<IMG_CONTEXT>", known.img_context);
  if (d->format == CheckpointFormat::HfInternVL && d->image_token_id >= 0) {
    FOVEA_CHECK(!added.count("<IMG_CONTEXT>") || context == d->image_token_id, dir, ": config.json image_token_id ",
                d->image_token_id, " disagrees with <IMG_CONTEXT> = ", context, " in the tokenizer files");
  } else {
    d->image_token_id = context;
  }
  // BOS and EOS as the checkpoint's tokenizer_config.json says (transformers' rule); the arch's InternVL rule
  // when it does not.
  const TokenizerRules rules = read_tokenizer_rules(dir);
  auto named = [&](const std::string& content, const char* key) {
    const auto it = added.find(content);
    FOVEA_CHECK(it != added.end(), dir, ": tokenizer_config.json ", key, " '", content,
                "' is not among the tokenizer's added tokens");
    return it->second;
  };
  if (rules.add_bos.has_value())
    d->bos_id = *rules.add_bos ? named(rules.bos_token.empty() ? "<s>" : rules.bos_token, "bos_token") : -1;
  else if (rules.post_processor_bos.has_value())
    d->bos_id = rules.post_processor_bos->empty() ? -1 : named(*rules.post_processor_bos, "post_processor token");
  else
    d->bos_id = qwen ? -1 : lookup("<s>", known.bos);
  const int im_end = lookup("<|im_end|>", known.im_end);
  const int second_stop = !rules.eos_token.empty() && added.count(rules.eos_token)
                              ? added.at(rules.eos_token)
                              : lookup(known.second_stop_name, known.second_stop);
  d->eos_ids = {im_end};
  if (second_stop != im_end) d->eos_ids.push_back(second_stop);
  // Qwen's generation configs stop on <|endoftext|> too, also where the tokenizer's eos_token is <|im_end|>.
  const auto endoftext = added.find("<|endoftext|>");
  if (qwen && endoftext != added.end() &&
      std::find(d->eos_ids.begin(), d->eos_ids.end(), endoftext->second) == d->eos_ids.end())
    d->eos_ids.push_back(endoftext->second);
  if (d->format == CheckpointFormat::HfInternVL && !d->template_named) use_model_chat_template(rules, d);

  auto check = [&](const char* what, int id) {
    FOVEA_CHECK(id >= 0 && id < d->llm.vocab, dir, ": ", what, " id ", id, " is outside the vocabulary (", d->llm.vocab,
                "): the tokenizer files do not match the model");
  };
  check("<img>", d->img_start_id);
  check("</img>", d->img_end_id);
  check("<IMG_CONTEXT>", d->image_token_id);
  if (d->bos_id >= 0) check("<s>", d->bos_id);
  for (int id : d->eos_ids) check("stop token", id);
}

}  // namespace fovea
