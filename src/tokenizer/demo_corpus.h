// The fixed text the demo tokenizer learns its pieces from (English and Chinese, the prompt's own words included).
#pragma once
#include <string_view>

namespace fovea {
std::string_view demo_tokenizer_corpus();
}
