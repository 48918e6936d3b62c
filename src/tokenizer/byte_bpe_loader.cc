// Reading byte-level BPE tokenizers: a Hugging Face tokenizer.json, or vocab.json + merges.txt (with the added
// tokens of tokenizer_config.json / added_tokens.json beside them). The pipelines of Qwen2, Llama-3, GPT-2 and
// SmolLM2 are supported (NFC or no normalizer; a Split with one of their regexes then ByteLevel, or ByteLevel's own
// GPT-2 regex, optionally after Digits(individual_digits)); anything else is refused rather than encoded wrongly.
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer_files.h"
#include "tokenizer/vocab_json.h"

namespace fovea {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json parse_json_file(const std::string& path) {
  try {
    return json::parse(read_file_bytes(path));
  } catch (const json::exception& e) {
    FOVEA_FAIL(path, ": invalid JSON: ", e.what());
  }
}

std::unordered_map<std::string, int32_t> read_vocab(const json& vocab, const std::string& where) {
  FOVEA_CHECK(vocab.is_object(), where, ": vocab is not an object");
  std::unordered_map<std::string, int32_t> out;
  out.reserve(vocab.size());
  for (const auto& [piece, id] : vocab.items()) {
    FOVEA_CHECK(id.is_number_integer(), where, ": id of '", piece, "' is not an integer");
    out.emplace(piece, id.get<int32_t>());
  }
  return out;
}

std::pair<std::string, std::string> split_merge_line(const std::string& line, const std::string& where) {
  const size_t space = line.find(' ');
  FOVEA_CHECK(space != std::string::npos && space > 0 && space + 1 < line.size() &&
                  line.find(' ', space + 1) == std::string::npos,
              where, ": bad merge rule '", line, "'");
  return {line.substr(0, space), line.substr(space + 1)};
}

std::vector<std::pair<std::string, std::string>> read_merges_txt(const std::string& path) {
  std::istringstream lines(read_file_bytes(path));
  std::vector<std::pair<std::string, std::string>> merges;
  std::string line;
  for (bool first = true; std::getline(lines, line); first = false) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (first && line.rfind("#version", 0) == 0)) continue;
    merges.push_back(split_merge_line(line, path));
  }
  return merges;
}

// True when the tokenizer.json normalizer is NFC; throws on one we do not implement.
bool check_normalizer(const json& normalizer, const std::string& where) {
  if (normalizer.is_null()) return false;
  const std::string type = normalizer.value("type", "");
  if (type == "NFC") return true;
  if (type == "Sequence" && normalizer.value("normalizers", json::array()).empty()) return false;
  FOVEA_FAIL(where, ": unsupported normalizer ", normalizer.dump());
}

bool split_pattern_from_regex(const std::string& regex, SplitPattern* pattern) {
  for (SplitPattern p : {SplitPattern::Qwen2, SplitPattern::Llama3, SplitPattern::Gpt2}) {
    if (regex == split_pattern_regex(p)) {
      *pattern = p;
      return true;
    }
  }
  return false;
}

// The steps must be: [Digits(individual_digits=true)], then Split(known regex, Isolated) + ByteLevel(use_regex
// false), or ByteLevel(use_regex true) alone (GPT-2's regex); add_prefix_space false throughout.
PreTokenizer read_pre_tokenizer(const json& pre, const std::string& where) {
  PreTokenizer out;
  bool split = false, byte_level = false;
  for (const json& step : pre.value("pretokenizers", json::array({pre}))) {
    const std::string type = step.value("type", "");
    const bool first = !split && !byte_level && !out.isolate_digits;
    if (type == "Digits" && step.value("individual_digits", false) && first) {
      out.isolate_digits = true;
    } else if (type == "Split" && !split && !byte_level && step.contains("pattern") &&
               split_pattern_from_regex(step["pattern"].value("Regex", ""), &out.pattern) &&
               step.value("behavior", "") == "Isolated" && !step.value("invert", false)) {
      split = true;
    } else if (type == "ByteLevel" && !byte_level && !step.value("add_prefix_space", false) &&
               step.value("use_regex", true) != split) {
      if (!split) out.pattern = SplitPattern::Gpt2;
      byte_level = true;
    } else {
      FOVEA_FAIL(where, ": unsupported pre-tokenizer step ", step.dump(),
                 " (supported: Qwen2, Llama-3, GPT-2 and SmolLM2 byte-level pipelines)");
    }
  }
  FOVEA_CHECK(byte_level, where, ": pre-tokenizer has no ByteLevel step");
  return out;
}

ByteLevelBpeSpec read_tokenizer_json(const std::string& path) {
  const json doc = parse_json_file(path);
  ByteLevelBpeSpec spec;
  try {
    const json& model = doc.at("model");
    FOVEA_CHECK(model.value("type", "BPE") == "BPE", path, ": model type is not BPE");
    FOVEA_CHECK(!model.value("byte_fallback", false), path,
                ": BPE with byte_fallback is SentencePiece-style, "
                "not byte-level (use tokenizer.model)");
    FOVEA_CHECK(!model.value("ignore_merges", false), path, ": ignore_merges is not supported");
    spec.nfc = check_normalizer(doc.value("normalizer", json()), path);
    spec.pre = read_pre_tokenizer(doc.at("pre_tokenizer"), path);
    spec.vocab = read_vocab(model.at("vocab"), path);
    for (const json& rule : model.at("merges")) {
      if (rule.is_string())
        spec.merges.push_back(split_merge_line(rule.get<std::string>(), path));
      else
        spec.merges.emplace_back(rule.at(0).get<std::string>(), rule.at(1).get<std::string>());
    }
    for (const json& token : doc.value("added_tokens", json::array()))
      spec.added.push_back(
          {token.at("content").get<std::string>(), token.at("id").get<int32_t>(), token.value("special", true)});
  } catch (const json::exception& e) {
    FOVEA_FAIL(path, ": ", e.what());
  }
  return spec;
}

}  // namespace

std::unique_ptr<Tokenizer> load_byte_level_bpe(const std::string& path) {
  const fs::path p(path);
  ByteLevelBpeSpec spec;
  if (p.filename() == "vocab.json") {
    const fs::path merges = p.parent_path() / "merges.txt";
    FOVEA_CHECK(fs::exists(merges), path, ": no merges.txt beside it");
    spec.vocab = parse_vocab_json(read_file_bytes(path), path);
    spec.merges = read_merges_txt(merges.string());
    spec.added = read_config_added_tokens(p.parent_path().string());
    spec.nfc = true;  // Qwen2's tokenizer_config implies the NFC + regex pipeline of its tokenizer.json
  } else {
    spec = read_tokenizer_json(path);
    for (AddedToken& token : read_config_added_tokens(p.parent_path().string())) spec.added.push_back(token);
  }
  return std::make_unique<ByteLevelBpe>(std::move(spec));
}

}  // namespace fovea
