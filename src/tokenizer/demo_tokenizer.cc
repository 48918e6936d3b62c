#include "tokenizer/demo_tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>

#include "core/error.h"
#include "tokenizer/demo_corpus.h"
#include "tokenizer/utf8.h"

namespace fovea {
namespace {

constexpr int kMaxLearnedMerges = 400;
constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";

using Word = std::vector<std::string>;  // a word as its current symbols

// Character classes that a learned piece never crosses, so pieces stay word-like ("▁bed", "照片").
int char_class(char32_t c) {
  if (c == ' ' || c == '\n') return 0;
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return 1;
  if (c >= '0' && c <= '9') return 2;
  if (c >= 0x4E00 && c <= 0x9FFF) return 3;
  return 4;
}

// Splits the corpus into words: a run of one class, with a preceding space attached as "▁" (SentencePiece style);
// newlines are words of their own.
std::map<Word, int> corpus_words(std::string_view corpus) {
  std::map<Word, int> counts;
  Word word;
  int word_class = -1;
  const auto finish = [&] {
    if (!word.empty()) ++counts[word];
    word.clear();
    word_class = -1;
  };
  for (size_t pos = 0; pos < corpus.size();) {
    size_t length = 0;
    const char32_t c = utf8::decode(corpus, pos, length);
    const std::string ch(corpus.substr(pos, length));
    pos += length;
    const int cls = char_class(c);
    if (c == ' ') {
      finish();
      word.push_back(std::string(kSpaceSymbol));
      continue;
    }
    if (c == '\n') {
      finish();
      word.push_back("\n");
      finish();
      continue;
    }
    const bool after_space = word.size() == 1 && word[0] == kSpaceSymbol;
    if (!word.empty() && !after_space && cls != word_class) finish();
    word.push_back(ch);
    word_class = cls;
  }
  finish();
  return counts;
}

// Classic BPE training: repeatedly merge the most frequent adjacent pair (ties: the smaller pair, so the result
// never depends on container order). Returns the merged pieces in the order learned.
std::vector<std::string> learn_merges(std::map<Word, int> words) {
  std::vector<std::string> merges;
  std::set<std::string> known;
  while (int(merges.size()) < kMaxLearnedMerges) {
    std::map<std::pair<std::string, std::string>, int> pair_counts;
    for (const auto& [word, count] : words)
      for (size_t i = 1; i < word.size(); ++i) pair_counts[{word[i - 1], word[i]}] += count;
    const std::pair<std::string, std::string>* best = nullptr;
    int best_count = 0;  // pairs seen once still merge, until kMaxLearnedMerges: whole rare words become pieces
    for (const auto& [pair, count] : pair_counts)
      if (count > best_count) best = &pair, best_count = count;
    if (best == nullptr) break;
    const auto [left, right] = *best;
    const std::string merged = left + right;
    if (known.insert(merged).second) merges.push_back(merged);
    std::map<Word, int> next;
    for (const auto& [word, count] : words) {
      Word out;
      for (size_t i = 0; i < word.size(); ++i) {
        if (i + 1 < word.size() && word[i] == left && word[i + 1] == right) {
          out.push_back(merged);
          ++i;
        } else {
          out.push_back(word[i]);
        }
      }
      next[out] += count;
    }
    words = std::move(next);
  }
  return merges;
}

// Every character of the corpus, most frequent first (ties by byte order).
std::vector<std::string> corpus_characters(std::string_view corpus) {
  std::map<std::string, int> counts;
  for (size_t pos = 0; pos < corpus.size();) {
    size_t length = 0;
    const char32_t c = utf8::decode(corpus, pos, length);
    ++counts[c == ' ' ? std::string(kSpaceSymbol) : std::string(corpus.substr(pos, length))];
    pos += length;
  }
  std::vector<std::pair<std::string, int>> sorted(counts.begin(), counts.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::string> chars;
  for (const auto& [ch, count] : sorted) chars.push_back(ch);
  return chars;
}

}  // namespace

SpModelProto build_demo_sentencepiece_model(DemoTokenizerIds* ids) {
  SpModelProto model;
  model.model_type = SpModelType::Bpe;
  model.byte_fallback = true;
  model.normalizer.name = "identity";
  model.normalizer.add_dummy_prefix = false;
  model.normalizer.remove_extra_whitespaces = false;
  model.normalizer.escape_whitespaces = true;
  model.pieces.push_back({"<unk>", 0.0f, SpPieceType::Unknown});
  model.pieces.push_back({"<s>", 0.0f, SpPieceType::Control});
  model.pieces.push_back({"</s>", 0.0f, SpPieceType::Control});
  for (int b = 0; b < 256; ++b) {
    char text[8];
    std::snprintf(text, sizeof(text), "<0x%02X>", b);
    model.pieces.push_back({text, 0.0f, SpPieceType::Byte});
  }
  // Scores give the merge priority: earlier-learned pieces score higher; single characters come last and score
  // lowest (their score never matters: characters are where merging starts, not something it produces).
  const std::string_view corpus = demo_tokenizer_corpus();
  float score = 0.0f;
  for (const std::string& piece : learn_merges(corpus_words(corpus)))
    model.pieces.push_back({piece, score--, SpPieceType::Normal});
  for (const std::string& ch : corpus_characters(corpus)) model.pieces.push_back({ch, score--, SpPieceType::Normal});

  DemoTokenizerIds found;
  const auto add_control = [&](const char* text) {
    model.pieces.push_back({text, 0.0f, SpPieceType::Control});
    return int(model.pieces.size()) - 1;
  };
  for (const char* text : {"<|plugin|>", "<|interpreter|>", "<|action_end|>", "<|action_start|>"}) add_control(text);
  found.im_end = add_control("<|im_end|>");
  found.im_start = add_control("<|im_start|>");
  found.img_start = add_control("<img>");
  found.img_end = add_control("</img>");
  found.img_context = add_control("<IMG_CONTEXT>");
  found.vocab_size = int(model.pieces.size());
  model.vocab_size = found.vocab_size;
  if (ids != nullptr) *ids = found;
  return model;
}

DemoTokenizerIds write_demo_sentencepiece_model(const std::string& path) {
  DemoTokenizerIds ids;
  const std::string bytes = serialize_sp_model(build_demo_sentencepiece_model(&ids));
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  FOVEA_CHECK(file.good(), "cannot create ", path);
  file.write(bytes.data(), std::streamsize(bytes.size()));
  file.close();
  FOVEA_CHECK(file.good(), "cannot write ", path);
  return ids;
}

}  // namespace fovea
