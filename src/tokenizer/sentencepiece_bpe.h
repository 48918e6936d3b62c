// SentencePiece BPE (tokenizer.model), encoding exactly as libsentencepiece 0.1.97 does: identity normalisation
// with the model's whitespace switches, user-defined pieces kept whole, then greedy merging of the adjacent pair
// whose concatenation is a piece with the highest score (leftmost on ties), unused pieces re-split, and unknown
// symbols spelled as <0xXX> byte pieces when the model has byte fallback.
#pragma once
#include <array>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/sp_model_proto.h"
#include "tokenizer/tokenizer.h"

namespace fovea {

class SentencePieceBpe final : public Tokenizer {
 public:
  // `added` are tokens from the checkpoint's tokenizer_config.json (they may rename pieces, e.g. InternLM2's
  // [UNUSED_TOKEN_146] is <|im_start|>, or lie past the model's pieces, e.g. InternVL's <img>).
  SentencePieceBpe(SpModelProto model, const std::vector<AddedToken>& added);
  SentencePieceBpe(const SentencePieceBpe&) = delete;  // piece_ids_ holds views into pieces_
  SentencePieceBpe& operator=(const SentencePieceBpe&) = delete;

  std::vector<int32_t> encode(const std::string& text, bool allow_special = false) const override;
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const override;
  std::string decode_bytes(const std::vector<int32_t>& ids, bool skip_special = false) const override;
  int32_t token_id(const std::string& piece) const override;
  std::string id_to_piece(int32_t id) const override;
  int vocab_size() const override { return vocab_size_; }

 private:
  struct Symbol {
    uint32_t begin, length;
    int32_t prev, next;
    bool frozen;  // a user-defined piece: never merged
  };
  std::string normalize(std::string_view text) const;
  std::vector<Symbol> split_symbols(std::string_view normalized) const;
  size_t user_defined_prefix(std::string_view text, size_t pos) const;
  void encode_plain(std::string_view text, std::vector<int32_t>& out) const;
  void encode_normalized(std::string_view normalized, std::vector<int32_t>& out) const;
  void index_space_neighbours();
  void emit_symbol(std::string_view piece, std::vector<int32_t>& out) const;
  int32_t normal_piece_id(std::string_view piece) const;  // -1 when absent

  SpModelProto model_;
  std::unordered_map<std::string_view, int32_t> piece_ids_;                    // normal, user-defined and unused pieces
  std::unordered_map<std::string_view, int32_t> reserved_ids_;                 // control, unknown and byte pieces
  std::array<std::vector<std::string_view>, 256> user_defined_by_first_byte_;  // longest first
  std::array<int32_t, 256> byte_piece_ids_{};
  std::vector<int16_t> byte_of_piece_;  // the byte a <0xXX> piece stands for, -1 for other pieces
  AddedTokens added_;
  int32_t unk_id_ = 0;
  int vocab_size_ = 0;
  // Characters that some piece has right before a "▁" (InternLM2: "▁", "\t", "\n"...). Before any other
  // character a "▁" starts a new word no merge can cross, so encoding may cut the text there: same ids, and
  // the merge queue stays word-sized instead of text-sized.
  std::unordered_set<char32_t> before_space_;
};

}  // namespace fovea
