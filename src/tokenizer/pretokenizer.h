// Byte-level BPE pre-tokenizers: hand-written matchers with the same result as the split regexes of Hugging Face
// `tokenizers`, run as Split(behavior=Isolated) does (the text is cut at every leftmost match; alternatives are
// tried in order, with the backtracking a regex engine would do):
//   Qwen2   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   Llama-3 the same with \p{N}{1,3} for \p{N}
//   GPT-2   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+  (ByteLevel's use_regex)
// optionally after a Digits(individual_digits=true) step, which isolates every \p{N} character (SmolLM2,
// StarCoder2).
#pragma once
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace fovea {

enum class SplitPattern : uint8_t { Qwen2, Llama3, Gpt2 };

struct PreTokenizer {
  bool isolate_digits = false;  // a Digits(individual_digits=true) step first
  SplitPattern pattern = SplitPattern::Qwen2;
};

// The regex text of a pattern exactly as tokenizer.json spells it (for Split steps; GPT-2's is ByteLevel's own).
const char* split_pattern_regex(SplitPattern pattern);

// Byte ranges [begin, end) of the pieces of valid UTF-8 `text`, in order, covering all of it.
std::vector<std::pair<size_t, size_t>> pretokenize(const PreTokenizer& pre, std::string_view text);
inline std::vector<std::pair<size_t, size_t>> qwen2_pretokenize(std::string_view text) {
  return pretokenize(PreTokenizer{}, text);
}

}  // namespace fovea
