// The Qwen2 pre-tokenizer: a hand-written matcher with the same result as the regex
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// run as Hugging Face's Split(behavior=Isolated) does: the text is cut at every leftmost match; alternatives are
// tried in order, with the backtracking a regex engine would do.
#pragma once
#include <string_view>
#include <utility>
#include <vector>

namespace fovea {

extern const char* const kQwen2PretokenizerRegex;

// Byte ranges [begin, end) of the pieces of valid UTF-8 `text`, in order, covering all of it.
std::vector<std::pair<size_t, size_t>> qwen2_pretokenize(std::string_view text);

}  // namespace fovea
