#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace fovea {

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {}

// Decodes the ids kept so far and emits the new bytes up to the last complete character. The first id of the
// stream (up to the first that gives text) is always kept in front, so a decoder rule that depends on it
// (SentencePiece's dummy-prefix removal) acts as in a one-shot decode; the ids after it are dropped once fully emitted
// (decoding is a concatenation after the first piece), which keeps each push O(1) instead of O(stream length).
std::string StreamDecoder::push(int32_t id) {
  ids_.push_back(id);
  const std::string bytes = tokenizer_.decode_bytes(ids_, skip_special_);
  if (bytes.size() < emitted_bytes_) return {};  // cannot happen with our tokenizers; never emit twice
  const size_t complete = bytes.size() - utf8::incomplete_tail_length(bytes);
  if (complete <= emitted_bytes_) return {};
  std::string out = utf8::sanitize(std::string_view(bytes).substr(emitted_bytes_, complete - emitted_bytes_));
  emitted_bytes_ = complete;
  if (complete == bytes.size() && ids_.size() > 1) {
    // Keep the ids up to the first one that produced text: that is where "start of text" rules stop applying.
    size_t keep = 1;
    std::string kept = tokenizer_.decode_bytes({ids_.front()}, skip_special_);
    while (kept.empty() && keep < ids_.size())
      kept = tokenizer_.decode_bytes({ids_.begin(), ids_.begin() + ++keep}, skip_special_);
    ids_.erase(ids_.begin() + std::ptrdiff_t(keep), ids_.end());
    emitted_bytes_ = kept.size();
  }
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
