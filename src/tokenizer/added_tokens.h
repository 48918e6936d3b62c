// Added/special tokens (<|im_start|>, <img>, <IMG_CONTEXT>, ...): whole strings with fixed ids that are cut out of
// the text before the model's own algorithm runs — but only when the caller allows it, so user text that happens
// to contain "<|im_end|>" stays plain text.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace fovea {

// Added token ids are refused from here on (16.7 M; the largest real vocabularies have a few hundred thousand).
constexpr int32_t kMaxAddedTokenId = int32_t(1) << 24;

struct AddedToken {
  std::string text;
  int32_t id = -1;
  bool special = true;  // dropped by decode(skip_special = true)
};

class AddedTokens {
 public:
  AddedTokens() = default;
  AddedTokens(const AddedTokens&) = delete;  // the index points into by_id_; moving keeps the nodes, copying not
  AddedTokens& operator=(const AddedTokens&) = delete;
  AddedTokens(AddedTokens&&) = default;
  AddedTokens& operator=(AddedTokens&&) = default;

  void add(AddedToken token);  // a later token with the same id replaces the earlier one
  bool empty() const { return by_id_.empty(); }

  // Splits `text` at the leftmost-longest occurrences of added tokens: calls on_text(segment) for the plain text
  // between them (never with an empty segment) and on_token(id) for each token.
  template <typename OnText, typename OnToken>
  void split(std::string_view text, OnText on_text, OnToken on_token) const {
    size_t plain_start = 0;
    for (size_t pos = 0; pos < text.size();) {
      const AddedToken* token = match_at(text, pos);
      if (token == nullptr) {
        ++pos;
        continue;
      }
      if (pos > plain_start) on_text(text.substr(plain_start, pos - plain_start));
      on_token(token->id);
      pos += token->text.size();
      plain_start = pos;
    }
    if (plain_start < text.size()) on_text(text.substr(plain_start));
  }

  // Appends the ids of `text` to `ids`: plain text through encode_plain(segment, ids); added tokens are cut out
  // first only when allow_special (user text keeps "<|im_end|>" as plain text).
  template <typename EncodePlain>
  void encode(std::string_view text, bool allow_special, std::vector<int32_t>& ids, EncodePlain encode_plain) const {
    if (!allow_special) {
      encode_plain(text, ids);
      return;
    }
    split(text, [&](std::string_view plain) { encode_plain(plain, ids); }, [&](int32_t id) { ids.push_back(id); });
  }

  const AddedToken* find_id(int32_t id) const;
  int32_t find_text(std::string_view text) const;  // -1 when absent
  int32_t max_id() const { return max_id_; }

 private:
  const AddedToken* match_at(std::string_view text, size_t pos) const;
  void rebuild_index();

  std::unordered_map<int32_t, AddedToken> by_id_;
  std::unordered_map<std::string, int32_t> by_text_;
  // Tokens grouped by first byte, longest first, so a match at a position is a short scan.
  std::array<std::vector<const AddedToken*>, 256> by_first_byte_;
  int32_t max_id_ = -1;
};

}  // namespace fovea
