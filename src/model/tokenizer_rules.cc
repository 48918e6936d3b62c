#include "model/tokenizer_rules.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"

namespace fovea {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A special token in tokenizer_config.json is a string, null, or an AddedToken object {"content": ...}.
std::string token_content(const json& config, const char* key, const std::string& where) {
  if (!config.contains(key) || config[key].is_null()) return "";
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  FOVEA_CHECK(v.is_object() && v.contains("content") && v["content"].is_string(), where, ": ", key,
              " is neither a string nor an object with a \"content\" string");
  return v["content"].get<std::string>();
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  FOVEA_CHECK(in, "cannot read ", path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

json read_json(const fs::path& path) {
  try {
    return json::parse(read_text(path));
  } catch (const json::exception& e) {
    FOVEA_FAIL(path.string(), ": bad JSON: ", e.what());
  }
}

// The text between `from` and the next `<|im_end|>` when it is a literal inside one Jinja string (no quote, no
// expression): the default system text of templates such as SmolLM2's and Qwen2's.
std::optional<std::string> literal_system_text(const std::string& tmpl) {
  for (const std::string newline : {std::string("\n"), std::string("\\n")}) {
    const std::string from = "<|im_start|>system" + newline;
    for (size_t at = tmpl.find(from); at != std::string::npos; at = tmpl.find(from, at + 1)) {
      const size_t begin = at + from.size();
      const size_t end = tmpl.find("<|im_end|>", begin);
      if (end == std::string::npos) continue;
      std::string text = tmpl.substr(begin, end - begin);
      if (text.empty() || text.find_first_of("'\"{}") != std::string::npos) continue;
      if (newline == "\\n") {  // a Jinja string escape: the rendered text has real newlines
        for (size_t p = text.find("\\n"); p != std::string::npos; p = text.find("\\n", p + 1)) text.replace(p, 2, "\n");
      }
      return text;
    }
  }
  return std::nullopt;
}

// The leading special token of a TemplateProcessing's "single" template, searched through a Sequence of processors.
std::string template_bos(const json& processor) {
  if (!processor.is_object()) return "";
  if (processor.value("type", "") == "Sequence")
    for (const json& p : processor.value("processors", json::array()))
      if (std::string bos = template_bos(p); !bos.empty()) return bos;
  if (processor.value("type", "") != "TemplateProcessing") return "";
  const json single = processor.value("single", json::array());
  if (!single.is_array() || single.empty() || !single[0].is_object() || !single[0].contains("SpecialToken")) return "";
  const json& special = single[0]["SpecialToken"];
  return special.is_object() && special.contains("id") && special["id"].is_string() ? special["id"].get<std::string>()
                                                                                      : "";
}

}  // namespace

TokenizerRules read_tokenizer_rules(const std::string& dir) {
  TokenizerRules rules;
  const fs::path config_path = fs::path(dir) / "tokenizer_config.json";
  if (fs::exists(config_path)) {
    const json config = read_json(config_path);
    const std::string where = config_path.string();
    FOVEA_CHECK(config.is_object(), where, ": not a JSON object");
    if (config.contains("add_bos_token") && !config["add_bos_token"].is_null()) {
      FOVEA_CHECK(config["add_bos_token"].is_boolean(), where, ": add_bos_token is not a boolean");
      rules.add_bos = config["add_bos_token"].get<bool>();
    }
    rules.bos_token = token_content(config, "bos_token", where);
    rules.eos_token = token_content(config, "eos_token", where);
    if (config.contains("chat_template") && !config["chat_template"].is_null()) {
      const json& t = config["chat_template"];
      if (t.is_string()) {
        rules.chat_template = t.get<std::string>();
      } else {
        FOVEA_CHECK(t.is_array(), where, ": chat_template is neither a string nor a list of named templates");
        for (const json& named : t)
          if (named.is_object() && named.value("name", "") == "default" && named.contains("template") &&
              named["template"].is_string())
            rules.chat_template = named["template"].get<std::string>();
      }
    }
  }
  const fs::path tokenizer_json = fs::path(dir) / "tokenizer.json";
  if (fs::exists(tokenizer_json)) {
    const json doc = read_json(tokenizer_json);
    if (doc.is_object() && doc.contains("post_processor") && !doc["post_processor"].is_null())
      rules.post_processor_bos = template_bos(doc["post_processor"]);
  }
  const fs::path jinja = fs::path(dir) / "chat_template.jinja";  // transformers 5 prefers it to the config key
  if (fs::exists(jinja)) rules.chat_template = read_text(jinja);
  return rules;
}

bool use_model_chat_template(const TokenizerRules& rules, ModelDesc* desc) {
  const std::string& t = rules.chat_template;
  const bool chatml = t.find("<|im_start|>") != std::string::npos && t.find("<|im_end|>") != std::string::npos &&
                      (t.find("message['role']") != std::string::npos || t.find("message.role") != std::string::npos ||
                       t.find("message[\"role\"]") != std::string::npos);
  if (!chatml) return false;
  desc->chat_template = ChatTemplateKind::ChatML;
  desc->template_system = literal_system_text(t);
  return true;
}

}  // namespace fovea
