#include "tokenizer/byte_level_bpe.h"

#include <algorithm>
#include <functional>
#include <queue>

#include "core/error.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace fovea {

// Printable bytes stand for themselves; the others are given the code points 256, 257, ... in byte order, so
// that every byte is one visible character in vocab.json.
const std::array<std::string, 256>& byte_alphabet() {
  static const std::array<std::string, 256> alphabet = [] {
    std::array<std::string, 256> out;
    char32_t next_extra = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      utf8::append(out[b], printable ? char32_t(b) : next_extra++);
    }
    return out;
  }();
  return alphabet;
}

namespace {
uint64_t pair_key(int32_t left, int32_t right) { return (uint64_t(uint32_t(left)) << 32) | uint32_t(right); }

// Inverse of byte_alphabet() for one piece; characters outside the alphabet are kept as their UTF-8.
std::string alphabet_to_bytes(std::string_view piece) {
  constexpr char32_t kAlphabetEnd = 512;  // the alphabet uses code points below 324
  static const std::array<int16_t, kAlphabetEnd> inverse = [] {
    std::array<int16_t, kAlphabetEnd> map;
    map.fill(-1);
    for (int b = 0; b < 256; ++b) {
      size_t length = 0;
      map[utf8::decode(byte_alphabet()[b], 0, length)] = int16_t(b);
    }
    return map;
  }();
  std::string out;
  for (size_t pos = 0; pos < piece.size();) {
    size_t length = 0;
    const char32_t cp = utf8::decode(piece, pos, length);
    if (cp < kAlphabetEnd && inverse[cp] >= 0)
      out += char(inverse[cp]);
    else
      out.append(piece.substr(pos, length));
    pos += length;
  }
  return out;
}
}  // namespace

ByteLevelBpe::ByteLevelBpe(ByteLevelBpeSpec spec) : vocab_(std::move(spec.vocab)), pre_(spec.pre), nfc_(spec.nfc) {
  // A vocab's ids are (nearly) dense: id -> piece tables are sized by the largest id, so one huge id in a
  // hostile vocab.json would allocate gigabytes. Real ones leave at most a few reserved ids unused.
  constexpr int64_t kMaxUnusedIds = int64_t(1) << 20;
  int32_t max_id = -1;
  for (const auto& [piece, id] : vocab_) {
    FOVEA_CHECK(id >= 0, "vocab: piece '", piece.substr(0, 64), "' has negative id ", id);
    FOVEA_CHECK(int64_t(id) < int64_t(vocab_.size()) + kMaxUnusedIds, "vocab: piece '", piece.substr(0, 64),
                "' has id ", id, ", which leaves more than ", kMaxUnusedIds, " of ", vocab_.size(),
                " pieces' ids unused: not a tokenizer vocab");
    max_id = std::max(max_id, id);
  }
  id_to_piece_.resize(size_t(max_id + 1));
  id_to_bytes_.resize(size_t(max_id + 1));
  for (const auto& [piece, id] : vocab_) {
    id_to_piece_[id] = piece;
    id_to_bytes_[id] = alphabet_to_bytes(piece);
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = vocab_.find(byte_alphabet()[b]);
    byte_ids_[b] = it == vocab_.end() ? -1 : it->second;
  }
  merges_.reserve(spec.merges.size());
  std::string merged;
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const auto& [left, right] = spec.merges[rank];
    merged.assign(left).append(right);
    const auto l = vocab_.find(left), r = vocab_.find(right), m = vocab_.find(merged);
    FOVEA_CHECK(l != vocab_.end() && r != vocab_.end() && m != vocab_.end(), "merges: rule ", rank + 1, " '", left, " ",
                right, "' names a piece missing from the vocab");
    merges_.emplace(pair_key(l->second, r->second), Merge{int32_t(rank), m->second});  // first rule wins
  }
  for (AddedToken& token : spec.added) added_.add(std::move(token));
  vocab_size_ = std::max<int>(max_id + 1, added_.max_id() + 1);
}

const ByteLevelBpe::Merge* ByteLevelBpe::find_merge(int32_t left, int32_t right) const {
  const auto it = merges_.find(pair_key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

// Merges the adjacent pair of lowest rank, leftmost first, until none applies. Pieces are usually a word, where
// a linear scan per merge beats a heap; long ones (a run of letters or symbols) go to the heap version so that
// hostile input cannot make encoding quadratic.
void ByteLevelBpe::encode_piece(std::string_view bytes, std::vector<int32_t>& out) const {
  constexpr size_t kLongPiece = 64;
  std::vector<int32_t> symbols;
  symbols.reserve(bytes.size());
  for (const char byte : bytes)  // a byte without a piece is dropped; its neighbours may then merge
    if (const int32_t id = byte_ids_[static_cast<unsigned char>(byte)]; id >= 0) symbols.push_back(id);
  if (symbols.size() > kLongPiece) return encode_long_piece(symbols, out);
  std::vector<const Merge*> pair_merges(symbols.size());  // pair_merges[i]: merge of symbols[i], symbols[i+1]
  for (size_t i = 0; i + 1 < symbols.size(); ++i) pair_merges[i] = find_merge(symbols[i], symbols[i + 1]);
  while (symbols.size() > 1) {
    size_t best = symbols.size();
    for (size_t i = 0; i + 1 < symbols.size(); ++i)
      if (pair_merges[i] && (best == symbols.size() || pair_merges[i]->rank < pair_merges[best]->rank)) best = i;
    if (best == symbols.size()) break;
    symbols[best] = pair_merges[best]->merged_id;
    symbols.erase(symbols.begin() + best + 1);
    pair_merges.erase(pair_merges.begin() + best + 1);
    pair_merges[best] = best + 1 < symbols.size() ? find_merge(symbols[best], symbols[best + 1]) : nullptr;
    if (best > 0) pair_merges[best - 1] = find_merge(symbols[best - 1], symbols[best]);
  }
  out.insert(out.end(), symbols.begin(), symbols.end());
}

// The same merge order with a priority queue over a linked list of symbols: (rank, position) is the order of
// the scan above, and a queued pair is skipped when either side has changed since it was queued.
void ByteLevelBpe::encode_long_piece(const std::vector<int32_t>& byte_symbols, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id, prev, next;
  };
  struct Candidate {
    int32_t rank, left, left_id, right_id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  const auto n = int32_t(byte_symbols.size());
  std::vector<Symbol> symbols(byte_symbols.size());
  for (int32_t i = 0; i < n; ++i) symbols[i] = {byte_symbols[i], i - 1, i + 1 < n ? i + 1 : -1};
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  const auto consider = [&](int32_t left) {
    if (left < 0 || symbols[left].next < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[l.next];
    if (const Merge* merge = find_merge(l.id, r.id)) queue.push({merge->rank, left, l.id, r.id});
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.left];
    if (left.id != top.left_id || left.next < 0 || symbols[left.next].id != top.right_id) continue;  // stale
    const int32_t right = left.next;
    left.id = find_merge(top.left_id, top.right_id)->merged_id;
    left.next = symbols[right].next;
    if (left.next >= 0) symbols[left.next].prev = top.left;
    symbols[right].id = -1;  // removed
    consider(left.prev);
    consider(top.left);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

void ByteLevelBpe::encode_plain(std::string_view raw, std::vector<int32_t>& out) const {
  const std::string valid = utf8::sanitize(raw);
  const std::string text = nfc_ ? unicode::nfc(valid) : valid;
  for (const auto& [begin, end] : pretokenize(pre_, text)) {
    // No shortcut for pieces that are whole vocab entries: Qwen2 does not set ignore_merges, and BPE does not
    // always reach such an entry.
    encode_piece(std::string_view(text).substr(begin, end - begin), out);
  }
}

std::vector<int32_t> ByteLevelBpe::encode(const std::string& text, bool allow_special) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  added_.encode(text, allow_special, ids, [this](std::string_view plain, std::vector<int32_t>& out) {
    encode_plain(plain, out);
  });
  return ids;
}

std::string ByteLevelBpe::decode_bytes(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string out;
  for (const int32_t id : ids) {
    if (const AddedToken* token = added_.find_id(id)) {
      if (!(skip_special && token->special)) out += token->text;
      continue;
    }
    // No such token (a model row past the tokenizer, a gap in vocab.json): nothing, as HF decoders do.
    if (id < 0 || size_t(id) >= id_to_piece_.size() || id_to_piece_[id].empty()) continue;
    out += id_to_bytes_[id];
  }
  return out;
}

std::string ByteLevelBpe::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  return utf8::sanitize(decode_bytes(ids, skip_special));
}

int32_t ByteLevelBpe::token_id(const std::string& piece) const {
  const int32_t added = added_.find_text(piece);
  if (added >= 0) return added;
  const auto it = vocab_.find(piece);
  return it == vocab_.end() ? -1 : it->second;
}

std::string ByteLevelBpe::id_to_piece(int32_t id) const {
  FOVEA_CHECK(id >= 0 && id < vocab_size_, "token id ", id, " is outside the vocabulary of ", vocab_size_);
  if (const AddedToken* token = added_.find_id(id)) return token->text;
  return id_to_piece_.at(id);
}

}  // namespace fovea
