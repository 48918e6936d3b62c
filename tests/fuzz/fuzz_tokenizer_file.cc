// A hostile tokenizer file (FUZZ_FILE: tokenizer.model, tokenizer.json, or vocab.json + merges.txt) loaded and
// then used: a few texts encoded (with and without special tokens), ids decoded, the stream decoder fed.
// For vocab.json the input is split at the first "\n#merges\n" line: vocab.json before, merges.txt after.
#include <cstdint>
#include <cstring>

#include "fuzz_util.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using fovea::fuzz::write_scratch;
  std::string input(reinterpret_cast<const char*>(data), size);
  std::string merges;
  if (std::strcmp(FUZZ_FILE, "vocab.json") == 0) {
    const size_t cut = input.find("\n#merges\n");
    if (cut != std::string::npos) {
      merges = input.substr(cut + 9);
      input.resize(cut);
    }
    write_scratch("merges.txt", merges.data(), merges.size());
  }
  const std::string path = write_scratch(FUZZ_FILE, input.data(), input.size());
  fovea::fuzz::expect_only_fovea_errors([&] {
    const auto tokenizer = fovea::load_tokenizer(path);
    for (const char* text : {"Hello, world! 123", " <|im_start|>user\n\xe4\xbd\xa0\xe5\xa5\xbd<s></s>\n", "\xff\xfe\x80 ",
                             "  \t\n\n  a  "}) {
      for (const bool special : {false, true}) {
        const std::vector<int32_t> ids = tokenizer->encode(text, special);
        (void)tokenizer->decode(ids);
      }
    }
    const int n = tokenizer->vocab_size();
    std::vector<int32_t> ids;
    for (int32_t id = -2; id < std::min(n + 2, 3000); ++id) ids.push_back(id);
    (void)tokenizer->decode(ids, false);
    (void)tokenizer->decode(ids, true);
    fovea::StreamDecoder stream(*tokenizer);
    for (int32_t id : ids) (void)stream.push(id);
    (void)stream.flush();
    for (int32_t id = 0; id < std::min(n, 3000); ++id) (void)tokenizer->token_id(tokenizer->id_to_piece(id));
  });
  return 0;
}
