// config.json (both checkpoint formats) through load_model_desc, next to a fixed tokenizer_config.json so the
// special-token checks run too.
#include <cstdint>

#include "fuzz_util.h"
#include "model/model_desc.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool once = [] {
    std::filesystem::copy_file(FOVEA_SOURCE_DIR "/tests/data/golden/internlm2/original/tokenizer_config.json",
                               fovea::fuzz::scratch_dir() / "tokenizer_config.json",
                               std::filesystem::copy_options::overwrite_existing);
    return true;
  }();
  (void)once;
  fovea::fuzz::write_scratch("config.json", reinterpret_cast<const char*>(data), size);
  fovea::fuzz::expect_only_fovea_errors([&] { fovea::load_model_desc(fovea::fuzz::scratch_dir().string()); });
  return 0;
}
