#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace fovea {

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {}

// Decodes everything seen so far and emits the new bytes up to the last complete character. Decoding the whole
// prefix (rather than id by id) keeps decoder rules that look at neighbours, like SentencePiece's dummy-prefix
// removal, exactly as in a one-shot decode.
std::string StreamDecoder::push(int32_t id) {
  ids_.push_back(id);
  const std::string bytes = tokenizer_.decode_bytes(ids_, skip_special_);
  if (bytes.size() < emitted_bytes_) return {};  // cannot happen with our tokenizers; never emit twice
  const size_t complete = bytes.size() - utf8::incomplete_tail_length(bytes);
  if (complete <= emitted_bytes_) return {};
  std::string out = utf8::sanitize(std::string_view(bytes).substr(emitted_bytes_, complete - emitted_bytes_));
  emitted_bytes_ = complete;
  return out;
}

std::string StreamDecoder::flush() {
  const std::string bytes = tokenizer_.decode_bytes(ids_, skip_special_);
  std::string out = emitted_bytes_ < bytes.size() ? utf8::sanitize(std::string_view(bytes).substr(emitted_bytes_)) : "";
  ids_.clear();
  emitted_bytes_ = 0;
  return out;
}

}  // namespace fovea
