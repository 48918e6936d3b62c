#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "core/error.h"

namespace fovea {

void AddedTokens::add(AddedToken token) {
  FOVEA_CHECK(!token.text.empty(), "added token ", token.id, " has empty text");
  FOVEA_CHECK(token.id >= 0, "added token '", token.text.substr(0, 64), "' has negative id ", token.id);
  // Vocab sizes derive from the largest id (max_id + 1 must not overflow, nor size a table by a hostile id); the
  // largest real vocabularies are a few hundred thousand ids.
  FOVEA_CHECK(token.id < kMaxAddedTokenId, "added token '", token.text.substr(0, 64), "' has id ", token.id,
              ", past any tokenizer's vocabulary (< ", kMaxAddedTokenId, ")");
  const auto old = by_id_.find(token.id);
  if (old != by_id_.end()) by_text_.erase(old->second.text);
  by_text_[token.text] = token.id;
  max_id_ = std::max(max_id_, token.id);
  by_id_[token.id] = std::move(token);
  rebuild_index();
}

void AddedTokens::rebuild_index() {
  for (auto& bucket : by_first_byte_) bucket.clear();
  for (const auto& [text, id] : by_text_) {
    const AddedToken& token = by_id_.at(id);
    by_first_byte_[static_cast<unsigned char>(text[0])].push_back(&token);
  }
  for (auto& bucket : by_first_byte_) {
    std::sort(bucket.begin(), bucket.end(), [](const AddedToken* a, const AddedToken* b) {
      return a->text.size() != b->text.size() ? a->text.size() > b->text.size() : a->text < b->text;
    });
  }
}

const AddedToken* AddedTokens::match_at(std::string_view text, size_t pos) const {
  for (const AddedToken* token : by_first_byte_[static_cast<unsigned char>(text[pos])])
    if (text.compare(pos, token->text.size(), token->text) == 0) return token;
  return nullptr;
}

const AddedToken* AddedTokens::find_id(int32_t id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &it->second;
}

int32_t AddedTokens::find_text(std::string_view text) const {
  const auto it = by_text_.find(std::string(text));
  return it == by_text_.end() ? -1 : it->second;
}

}  // namespace fovea
