#include "tokenizer/tokenizer_files.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/error.h"

namespace fovea {
namespace fs = std::filesystem;

std::string read_file_bytes(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  FOVEA_CHECK(file.good(), "cannot open ", path);
  std::ostringstream bytes;
  bytes << file.rdbuf();
  FOVEA_CHECK(!file.bad(), "cannot read ", path);
  return bytes.str();
}

namespace {
nlohmann::json read_json(const fs::path& path) {
  try {
    return nlohmann::json::parse(read_file_bytes(path.string()));
  } catch (const nlohmann::json::exception& e) {
    FOVEA_FAIL(path.string(), ": invalid JSON: ", e.what());
  }
}
}  // namespace

std::vector<AddedToken> read_config_added_tokens(const std::string& dir) {
  std::vector<AddedToken> tokens;
  std::set<int32_t> named;
  const fs::path config = fs::path(dir) / "tokenizer_config.json";
  if (fs::exists(config)) {
    const nlohmann::json json = read_json(config);
    if (json.contains("added_tokens_decoder")) {
      try {
        for (const auto& [id_text, entry] : json.at("added_tokens_decoder").items()) {
          const int32_t id = std::stoi(id_text);
          tokens.push_back({entry.at("content").get<std::string>(), id, entry.value("special", true)});
          named.insert(id);
        }
      } catch (const std::exception& e) {
        FOVEA_FAIL(config.string(), ": bad added_tokens_decoder: ", e.what());
      }
    }
  }
  const fs::path added = fs::path(dir) / "added_tokens.json";
  if (fs::exists(added)) {
    const nlohmann::json json = read_json(added);
    FOVEA_CHECK(json.is_object(), added.string(), ": expected an object of token -> id");
    for (const auto& [text, id] : json.items()) {
      FOVEA_CHECK(id.is_number_integer(), added.string(), ": id of '", text, "' is not an integer");
      if (!named.count(id.get<int32_t>())) tokens.push_back({text, id.get<int32_t>(), true});
    }
  }
  return tokens;
}

}  // namespace fovea
