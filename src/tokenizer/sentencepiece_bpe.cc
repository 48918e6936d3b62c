#include "tokenizer/sentencepiece_bpe.h"

#include <algorithm>
#include <cstdio>
#include <queue>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace fovea {
namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

bool is_normal_kind(SpPieceType type) {
  return type == SpPieceType::Normal || type == SpPieceType::UserDefined || type == SpPieceType::Unused;
}

// The byte of a "<0xXX>" piece text, or -1.
int parse_byte_piece(const std::string& text) {
  if (text.size() != 6 || text.compare(0, 3, "<0x") != 0 || text[5] != '>') return -1;
  int value = 0;
  for (int i = 3; i < 5; ++i) {
    const char c = text[i];
    value *= 16;
    if (c >= '0' && c <= '9')
      value += c - '0';
    else if (c >= 'A' && c <= 'F')
      value += c - 'A' + 10;
    else
      return -1;
  }
  return value;
}

std::string byte_piece_text(int byte) {
  char text[8];
  std::snprintf(text, sizeof(text), "<0x%02X>", byte);
  return text;
}

// A candidate merge of symbols[left] and symbols[right]; `length` detects that one side changed since it was
// queued (libsentencepiece's staleness check).
struct MergeCandidate {
  float score;
  int32_t left, right;
  uint32_t length;
};
struct LowerPriority {
  bool operator()(const MergeCandidate& a, const MergeCandidate& b) const {
    return a.score != b.score ? a.score < b.score : a.left > b.left;  // highest score, then leftmost, first
  }
};

}  // namespace

SentencePieceBpe::SentencePieceBpe(SpModelProto model, const std::vector<AddedToken>& added)
    : model_(std::move(model)) {
  FOVEA_CHECK(model_.model_type == SpModelType::Bpe, "tokenizer.model: only BPE models are supported (model_type ",
              int(model_.model_type), ")");
  FOVEA_CHECK(model_.normalizer.precompiled_charsmap.empty(), "tokenizer.model: normalizer '", model_.normalizer.name,
              "' with a character map is not supported");
  FOVEA_CHECK(!model_.treat_whitespace_as_suffix, "tokenizer.model: treat_whitespace_as_suffix is not supported");
  byte_piece_ids_.fill(-1);
  unk_id_ = -1;
  byte_of_piece_.assign(model_.pieces.size(), -1);
  for (size_t i = 0; i < model_.pieces.size(); ++i) {
    const SpPiece& piece = model_.pieces[i];
    FOVEA_CHECK(!piece.text.empty(), "tokenizer.model: piece ", i, " is empty");
    FOVEA_CHECK(int(piece.type) >= int(SpPieceType::Normal) && int(piece.type) <= int(SpPieceType::Byte),
                "tokenizer.model: piece ", i, " has unknown type ", int(piece.type));
    if (piece.type == SpPieceType::Byte) {
      byte_of_piece_[i] = int16_t(parse_byte_piece(piece.text));
      FOVEA_CHECK(byte_of_piece_[i] >= 0, "tokenizer.model: byte piece ", i, " is not <0xXX>: '", piece.text, "'");
    }
    auto& table = is_normal_kind(piece.type) ? piece_ids_ : reserved_ids_;
    FOVEA_CHECK(table.emplace(piece.text, int32_t(i)).second, "tokenizer.model: piece '", piece.text,
                "' is defined twice");
    if (piece.type == SpPieceType::UserDefined)
      user_defined_by_first_byte_[static_cast<unsigned char>(piece.text[0])].push_back(piece.text);
    if (piece.type == SpPieceType::Unknown) unk_id_ = int32_t(i);
    if (piece.type == SpPieceType::Control || piece.type == SpPieceType::Unknown)
      added_.add({piece.text, int32_t(i), true});
  }
  FOVEA_CHECK(unk_id_ >= 0, "tokenizer.model: no unknown piece");
  for (auto& bucket : user_defined_by_first_byte_)
    std::sort(bucket.begin(), bucket.end(), [](auto a, auto b) { return a.size() > b.size(); });
  if (model_.byte_fallback) {
    for (int b = 0; b < 256; ++b) {
      const auto it = reserved_ids_.find(byte_piece_text(b));
      FOVEA_CHECK(it != reserved_ids_.end(), "tokenizer.model: byte fallback without piece ", byte_piece_text(b));
      byte_piece_ids_[b] = it->second;
    }
  }
  for (const AddedToken& token : added) added_.add(token);
  index_space_neighbours();
  vocab_size_ = std::max<int>(int(model_.pieces.size()), added_.max_id() + 1);
}

void SentencePieceBpe::index_space_neighbours() {
  for (const auto& [text, id] : piece_ids_) {
    for (size_t at = text.find(kSpaceSymbol, 1); at != std::string_view::npos; at = text.find(kSpaceSymbol, at + 1)) {
      size_t start = at - 1;  // back up to the first byte of the character before the "▁"
      while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
      size_t length = 0;
      before_space_.insert(utf8::decode(text.substr(start, at - start), 0, length));
    }
  }
}

// Identity normalisation plus the whitespace switches (the only normaliser InternLM2-style models use).
std::string SentencePieceBpe::normalize(std::string_view raw) const {
  const SpNormalizerSpec& spec = model_.normalizer;
  const std::string text = utf8::sanitize(raw);
  std::string_view input = text;
  if (spec.remove_extra_whitespaces) {
    const size_t first = input.find_first_not_of(' ');
    if (first == std::string_view::npos) return {};
    input = input.substr(first, input.find_last_not_of(' ') - first + 1);
  }
  std::string out;
  out.reserve(input.size() + 8);
  if (spec.add_dummy_prefix && !input.empty()) out += spec.escape_whitespaces ? kSpaceSymbol : " ";
  for (size_t i = 0; i < input.size(); ++i) {
    // User-defined pieces are copied untouched (libsentencepiece matches them before normalising).
    const size_t user_length = user_defined_prefix(input, i);
    if (user_length > 0) {
      out.append(input.substr(i, user_length));
      i += user_length - 1;
      continue;
    }
    const char c = input[i];
    if (c == ' ' && spec.remove_extra_whitespaces && i > 0 && input[i - 1] == ' ') continue;
    if (c == ' ' && spec.escape_whitespaces)
      out += kSpaceSymbol;
    else
      out += c;
  }
  return out;
}

size_t SentencePieceBpe::user_defined_prefix(std::string_view text, size_t pos) const {
  for (std::string_view piece : user_defined_by_first_byte_[static_cast<unsigned char>(text[pos])])
    if (text.compare(pos, piece.size(), piece) == 0) return piece.size();
  return 0;
}

// One symbol per character, except that a user-defined piece is one frozen symbol.
std::vector<SentencePieceBpe::Symbol> SentencePieceBpe::split_symbols(std::string_view normalized) const {
  std::vector<Symbol> symbols;
  symbols.reserve(normalized.size());
  for (size_t pos = 0; pos < normalized.size();) {
    size_t length = user_defined_prefix(normalized, pos);
    const bool frozen = length > 0;
    if (!frozen) utf8::decode(normalized, pos, length);  // input is sanitized: this is the character's length
    const auto index = int32_t(symbols.size());
    symbols.push_back({uint32_t(pos), uint32_t(length), index - 1, -1, frozen});
    if (index > 0) symbols[index - 1].next = index;
    pos += length;
  }
  return symbols;
}

int32_t SentencePieceBpe::normal_piece_id(std::string_view piece) const {
  const auto it = piece_ids_.find(piece);
  return it == piece_ids_.end() ? -1 : it->second;
}

void SentencePieceBpe::encode_plain(std::string_view text, std::vector<int32_t>& out) const {
  const std::string normalized = normalize(text);
  const std::string_view all = normalized;
  size_t word_start = 0;
  char32_t previous = 0;
  for (size_t pos = 0; pos < all.size();) {
    size_t length = 0;
    const char32_t cp = utf8::decode(all, pos, length);
    if (cp == 0x2581 && pos > word_start && !before_space_.count(previous)) {
      encode_normalized(all.substr(word_start, pos - word_start), out);
      word_start = pos;
    }
    previous = cp;
    pos += length;
  }
  if (word_start < all.size()) encode_normalized(all.substr(word_start), out);
}

void SentencePieceBpe::encode_normalized(std::string_view all, std::vector<int32_t>& out) const {
  if (all.empty()) return;
  std::vector<Symbol> symbols = split_symbols(all);
  std::priority_queue<MergeCandidate, std::vector<MergeCandidate>, LowerPriority> agenda;
  // Unused pieces may be passed through while merging but are split again at the end into what formed them.
  std::unordered_map<std::string_view, std::pair<std::string_view, std::string_view>> unused_splits;

  const auto piece_of = [&](const Symbol& s) { return all.substr(s.begin, s.length); };
  const auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0 || symbols[left].frozen || symbols[right].frozen) return;
    const uint32_t length = symbols[left].length + symbols[right].length;
    const std::string_view merged = all.substr(symbols[left].begin, length);
    const int32_t id = normal_piece_id(merged);
    if (id < 0) return;
    agenda.push({model_.pieces[id].score, left, right, length});
    if (model_.pieces[id].type == SpPieceType::Unused)
      unused_splits[merged] = {piece_of(symbols[left]), piece_of(symbols[right])};
  };

  for (size_t i = 1; i < symbols.size(); ++i) consider(int32_t(i - 1), int32_t(i));
  while (!agenda.empty()) {
    const MergeCandidate top = agenda.top();
    agenda.pop();
    Symbol& left = symbols[top.left];
    Symbol& right = symbols[top.right];
    if (left.length == 0 || right.length == 0 || left.length + right.length != top.length) continue;  // stale
    left.length += right.length;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.left;
    right.length = 0;
    consider(left.prev, top.left);
    consider(top.left, left.next);
  }

  const auto resegment = [&](auto&& self, std::string_view piece) -> void {
    const int32_t id = normal_piece_id(piece);
    const auto split = unused_splits.find(piece);
    if (id >= 0 && model_.pieces[id].type == SpPieceType::Unused && split != unused_splits.end()) {
      self(self, split->second.first);
      self(self, split->second.second);
      return;
    }
    emit_symbol(piece, out);
  };
  for (int32_t i = 0; i >= 0; i = symbols[i].next) resegment(resegment, piece_of(symbols[i]));
}

void SentencePieceBpe::emit_symbol(std::string_view piece, std::vector<int32_t>& out) const {
  const int32_t id = normal_piece_id(piece);
  if (id >= 0) {
    out.push_back(id);
  } else if (model_.byte_fallback) {
    for (char byte : piece) out.push_back(byte_piece_ids_[static_cast<unsigned char>(byte)]);
  } else if (out.empty() || out.back() != unk_id_) {
    out.push_back(unk_id_);  // like libsentencepiece, a run of unknown symbols becomes one <unk>
  }
}

std::vector<int32_t> SentencePieceBpe::encode(const std::string& text, bool allow_special) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 2 + 4);
  added_.encode(text, allow_special, ids, [this](std::string_view plain, std::vector<int32_t>& out) {
    encode_plain(plain, out);
  });
  return ids;
}

std::string SentencePieceBpe::decode_bytes(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string out;
  for (const int32_t id : ids) {
    if (const AddedToken* token = added_.find_id(id)) {
      if (!(skip_special && token->special)) out += token->text;
      continue;
    }
    if (id < 0 || size_t(id) >= model_.pieces.size()) continue;  // no such token: nothing, as HF decoders do
    const SpPiece& piece = model_.pieces[id];
    if (piece.type == SpPieceType::Byte) {
      out += char(byte_of_piece_[id]);
      continue;
    }
    const bool first_text = out.empty();
    std::string_view text = piece.text;
    for (size_t pos = 0; pos < text.size();) {
      if (model_.normalizer.escape_whitespaces && text.compare(pos, kSpaceSymbol.size(), kSpaceSymbol) == 0) {
        // The dummy prefix added at encode time is taken off again, as libsentencepiece does.
        if (!(first_text && pos == 0 && model_.normalizer.add_dummy_prefix)) out += ' ';
        pos += kSpaceSymbol.size();
      } else {
        out += text[pos++];
      }
    }
  }
  return out;
}

std::string SentencePieceBpe::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  return utf8::sanitize(decode_bytes(ids, skip_special));
}

int32_t SentencePieceBpe::token_id(const std::string& piece) const {
  const int32_t added = added_.find_text(piece);
  if (added >= 0) return added;
  if (const auto it = piece_ids_.find(piece); it != piece_ids_.end()) return it->second;
  if (const auto it = reserved_ids_.find(piece); it != reserved_ids_.end()) return it->second;
  return -1;
}

std::string SentencePieceBpe::id_to_piece(int32_t id) const {
  FOVEA_CHECK(id >= 0 && id < vocab_size_, "token id ", id, " is outside the vocabulary of ", vocab_size_);
  if (const AddedToken* token = added_.find_id(id)) return token->text;
  return model_.pieces.at(id).text;
}

}  // namespace fovea
