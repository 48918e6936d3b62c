// Tokenizers Fovea implements itself: SentencePiece BPE (tokenizer.model) and byte-level BPE (tokenizer.json,
// or vocab.json + merges.txt). Special/added tokens are split out of text only when the caller allows it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace fovea {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // No BOS is added. With allow_special, added/special tokens written in the text (e.g. "<|im_start|>") become
  // their ids; without it they are encoded as plain text.
  virtual std::vector<int32_t> encode(const std::string& text, bool allow_special = false) const = 0;
  // Joins pieces back to UTF-8 (byte-fallback pieces and partial sequences joined). Special tokens are written
  // out as their text unless skip_special. Ids the tokenizer does not have (e.g. model rows past its vocabulary)
  // decode to nothing, as in Hugging Face decoders; invalid UTF-8 in the result becomes U+FFFD.
  virtual std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const = 0;
  // decode() before invalid UTF-8 is replaced by U+FFFD: the raw bytes, which StreamDecoder needs to hold back an
  // unfinished character. Tokenizers that cannot do better may keep this default.
  virtual std::string decode_bytes(const std::vector<int32_t>& ids, bool skip_special = false) const {
    return decode(ids, skip_special);
  }
  virtual int32_t token_id(const std::string& piece) const = 0;  // -1 when absent (special tokens included)
  virtual std::string id_to_piece(int32_t id) const = 0;
  virtual int vocab_size() const = 0;
};

// PATH is a tokenizer.model, a tokenizer.json, a vocab.json (with merges.txt beside it), or a directory holding
// one of those. Throws fovea::Error on anything it cannot read.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

// Turns a stream of ids into UTF-8 text pieces, holding back bytes of an incomplete character until it is whole.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special = true);
  std::string push(int32_t id);  // text that became complete with this id (may be empty)
  std::string flush();           // whatever is held back (invalid bytes become U+FFFD)

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  std::vector<int32_t> ids_;
  size_t emitted_bytes_ = 0;
};

}  // namespace fovea
