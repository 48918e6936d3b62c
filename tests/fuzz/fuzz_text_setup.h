// The demo checkpoint's description and SentencePiece tokenizer, and a small byte-level BPE (the committed
// seed tokenizer.json), made once per fuzzing process for the targets that fuzz text rather than files.
#pragma once
#include "fuzz_util.h"
#include "model/demo_model.h"
#include "model/model_desc.h"
#include "tokenizer/tokenizer.h"

namespace fovea::fuzz {

struct TextSetup {
  ModelDesc desc;
  std::unique_ptr<Tokenizer> sentencepiece, byte_level;
};

inline const TextSetup& text_setup() {
  static const TextSetup setup = [] {
    TextSetup s;
    const std::string dir = (scratch_dir() / "demo").string();
    write_demo_model(dir);
    s.desc = load_model_desc(dir);
    s.sentencepiece = load_tokenizer(dir);
    s.byte_level = load_tokenizer(FOVEA_SOURCE_DIR "/tests/fuzz/corpus/fuzz_tokenizer_json/qwen2_small.json");
    return s;
  }();
  return setup;
}

}  // namespace fovea::fuzz
