#include <filesystem>

#include "core/error.h"
#include "tokenizer/sentencepiece_bpe.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_files.h"

namespace fovea {
namespace fs = std::filesystem;

std::unique_ptr<Tokenizer> load_byte_level_bpe(const std::string& path);  // byte_bpe_loader.cc

namespace {

std::unique_ptr<Tokenizer> load_sentencepiece(const fs::path& model_path) {
  SpModelProto model;
  try {
    model = parse_sp_model(read_file_bytes(model_path.string()));
  } catch (const Error& e) {
    FOVEA_FAIL(model_path.string(), ": ", e.what());
  }
  FOVEA_CHECK(!model.pieces.empty(), model_path.string(), ": no pieces (not a SentencePiece model?)");
  return std::make_unique<SentencePieceBpe>(std::move(model),
                                            read_config_added_tokens(model_path.parent_path().string()));
}

}  // namespace

// A directory is searched in the order of exactness: tokenizer.model (libsentencepiece's own format) first, then
// tokenizer.json, then vocab.json + merges.txt.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  const fs::path p(path);
  FOVEA_CHECK(fs::exists(p), "tokenizer path ", path, " does not exist");
  if (fs::is_directory(p)) {
    if (fs::exists(p / "tokenizer.model")) return load_sentencepiece(p / "tokenizer.model");
    if (fs::exists(p / "tokenizer.json")) return load_byte_level_bpe((p / "tokenizer.json").string());
    if (fs::exists(p / "vocab.json")) return load_byte_level_bpe((p / "vocab.json").string());
    FOVEA_FAIL(path, " holds no tokenizer.model, tokenizer.json or vocab.json");
  }
  if (p.extension() == ".json") return load_byte_level_bpe(path);
  return load_sentencepiece(p);
}

}  // namespace fovea
