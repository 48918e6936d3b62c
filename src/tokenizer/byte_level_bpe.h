// Byte-level BPE (Hugging Face `tokenizers` semantics): optional NFC, a pre-tokenizer (Qwen2's, Llama-3's, GPT-2's,
// SmolLM2's), each piece's UTF-8 bytes mapped to GPT-2's printable byte alphabet, then merges applied lowest rank
// first (leftmost among equal ranks) within each piece. Bytes the vocabulary has no piece for are dropped before
// merging, as `tokenizers` does for a BPE without an unknown token (SmolLM2 lacks 21 of the 256).
#pragma once
#include <array>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"

namespace fovea {

struct ByteLevelBpeSpec {
  std::unordered_map<std::string, int32_t> vocab;           // byte-alphabet piece -> id
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  std::vector<AddedToken> added;
  bool nfc = true;
  PreTokenizer pre;  // Qwen2's unless the tokenizer.json says otherwise
};

class ByteLevelBpe final : public Tokenizer {
 public:
  explicit ByteLevelBpe(ByteLevelBpeSpec spec);

  std::vector<int32_t> encode(const std::string& text, bool allow_special = false) const override;
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const override;
  std::string decode_bytes(const std::vector<int32_t>& ids, bool skip_special = false) const override;
  int32_t token_id(const std::string& piece) const override;
  std::string id_to_piece(int32_t id) const override;
  int vocab_size() const override { return vocab_size_; }

 private:
  struct Merge {
    int32_t rank;
    int32_t merged_id;
  };
  void encode_plain(std::string_view text, std::vector<int32_t>& out) const;
  void encode_piece(std::string_view bytes, std::vector<int32_t>& out) const;
  void encode_long_piece(const std::vector<int32_t>& byte_symbols, std::vector<int32_t>& out) const;
  const Merge* find_merge(int32_t left, int32_t right) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_to_piece_;        // byte-alphabet text of each vocab id ("" for gaps)
  std::vector<std::string> id_to_bytes_;        // the raw bytes each vocab id stands for
  std::unordered_map<uint64_t, Merge> merges_;  // key: (left id << 32) | right id
  std::array<int32_t, 256> byte_ids_{};  // -1: no piece for that byte
  PreTokenizer pre_;
  AddedTokens added_;
  bool nfc_ = true;
  int vocab_size_ = 0;
};

// GPT-2's reversible byte -> printable character map ("Ġ" for a space), as UTF-8.
const std::array<std::string, 256>& byte_alphabet();

}  // namespace fovea
