#include <memory>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace fovea {

std::unique_ptr<Tokenizer> load_byte_level_bpe(const std::string& path) {
  FOVEA_FAIL(path, ": byte-level BPE is not implemented yet");
}

}  // namespace fovea
