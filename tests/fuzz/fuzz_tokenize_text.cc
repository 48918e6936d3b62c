// Hostile text (invalid UTF-8, special-token look-alikes, long runs) through both tokenizers: encode with and
// without special tokens, decode back, stream-decode; byte-level BPE must round-trip any valid UTF-8 exactly.
#include <cstdint>

#include "fuzz_text_setup.h"
#include "tokenizer/utf8.h"

// The demo checkpoint is written before fuzzing starts, so its cost is not charged to the first input.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)fovea::fuzz::text_setup();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& setup = fovea::fuzz::text_setup();
  const std::string text(reinterpret_cast<const char*>(data), size);
  fovea::fuzz::expect_only_fovea_errors([&] {
    for (const fovea::Tokenizer* t : {setup.sentencepiece.get(), setup.byte_level.get()}) {
      for (const bool special : {false, true}) {
        const std::vector<int32_t> ids = t->encode(text, special);
        for (int32_t id : ids)
          if (id < 0 || id >= t->vocab_size()) std::abort();
        const std::string back = t->decode(ids);
        if (t == setup.byte_level.get() && !special && fovea::utf8::sanitize(text) == text && back != text) std::abort();
        fovea::StreamDecoder stream(*t, false);
        std::string streamed;
        for (int32_t id : ids) streamed += stream.push(id);
        streamed += stream.flush();
        if (streamed != back) std::abort();
      }
    }
  });
  return 0;
}
