// Byte-level pipelines besides Qwen2's, against Hugging Face `tokenizers` (golden files made by
// gen_pretokenizer_vectors.py): where GPT-2's, Llama-3's and SmolLM2's pre-tokenizers cut 418 random texts, and a
// vocabulary without all 256 byte pieces. Self-contained: no ../shared needed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"
#include "support/temp_dir.h"
#include "vectors.h"

using namespace fovea;
using test::ids_str;

namespace {

const std::string kGolden = std::string(FOVEA_SOURCE_DIR) + "/tests/tokenizer/golden/";

void expect_cuts(const PreTokenizer& pre, const std::string& out_name) {
  const auto cases = test::read_vectors(kGolden + "pretok_texts.inp", kGolden + out_name);
  ASSERT_EQ(cases.size(), 418u);
  for (const auto& c : cases) {
    std::vector<int32_t> ends;
    for (const auto& [begin, end] : pretokenize(pre, c.text)) ends.push_back(int32_t(end));
    EXPECT_EQ(ids_str(ends), ids_str(c.ids)) << out_name << " text: [" << c.text << "]";
  }
}

// `dir`/`name`/tokenizer.json with the given pre_tokenizer JSON and a two-piece vocabulary beyond the bytes; returns
// its path.
std::string write_tokenizer_json(const test::TempDir& dir, const std::string& name, const std::string& pre_tokenizer) {
  return dir.write(name + "/tokenizer.json",
                   R"({"added_tokens": [], "normalizer": null, "pre_tokenizer": )" + pre_tokenizer +
                       R"(, "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a", "b"]]}})");
}

}  // namespace

TEST(Pretokenizers, Gpt2CutsAsHuggingFace) { expect_cuts({false, SplitPattern::Gpt2}, "pretok_gpt2.out"); }
TEST(Pretokenizers, Llama3CutsAsHuggingFace) { expect_cuts({false, SplitPattern::Llama3}, "pretok_llama3.out"); }
TEST(Pretokenizers, SmolLM2CutsAsHuggingFace) { expect_cuts({true, SplitPattern::Gpt2}, "pretok_smollm2.out"); }

TEST(Pretokenizers, HandPickedCuts) {
  auto cuts = [](const PreTokenizer& pre, const std::string& text) {
    std::vector<std::string> out;
    for (const auto& [b, e] : pretokenize(pre, text)) out.push_back(text.substr(b, e - b));
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(cuts({false, SplitPattern::Gpt2}, "I'M 2024  ok"), (V{"I", "'", "M", " 2024", " ", " ok"}));
  EXPECT_EQ(cuts({false, SplitPattern::Llama3}, "I'M 12345"), (V{"I", "'M", " ", "123", "45"}));
  EXPECT_EQ(cuts({true, SplitPattern::Gpt2}, "x 42"), (V{"x", " ", "4", "2"}));
}

// SmolLM2's vocabulary lacks 21 byte pieces: `tokenizers` drops those bytes (no unknown token) and merges what is
// left; a vocabulary missing a byte used to be refused.
TEST(Pretokenizers, VocabularyWithoutEveryByteDropsThemAsHuggingFace) {
  const auto tokenizer = load_tokenizer(kGolden + "missing_bytes.json");
  const auto cases = test::read_vectors(kGolden + "pretok_texts.inp", kGolden + "missing_bytes.out");
  ASSERT_EQ(cases.size(), 418u);
  for (const auto& c : cases)
    EXPECT_EQ(ids_str(tokenizer->encode(c.text)), ids_str(c.ids)) << "text: [" << c.text << "]";
  EXPECT_TRUE(tokenizer->encode("\x04").empty());
}

TEST(Pretokenizers, LoaderReadsEachPipelineAndRefusesOthers) {
  const test::TempDir dir("pretok");
  const std::string byte_level_regex = R"({"type": "ByteLevel", "add_prefix_space": false, "use_regex": true})";
  const std::string smollm2 = R"({"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": true},)" +
                              byte_level_regex + "]}";
  EXPECT_EQ(load_tokenizer(write_tokenizer_json(dir, "smollm2", smollm2))->encode("ab1"),
            (std::vector<int32_t>{2}));  // "1" has no piece here: dropped
  EXPECT_NO_THROW(load_tokenizer(write_tokenizer_json(dir, "gpt2", byte_level_regex)));
  const std::string llama3 = std::string(R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": )") +
                             nlohmann::json(split_pattern_regex(SplitPattern::Llama3)).dump() +
                             R"(}, "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]})";
  EXPECT_NO_THROW(load_tokenizer(write_tokenizer_json(dir, "llama3", llama3)));
  for (const std::string& bad : std::vector<std::string>{R"({"type": "ByteLevel", "add_prefix_space": true, "use_regex": true})",
                                R"({"type": "Whitespace"})",
                                R"({"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": false},)" +
                                    byte_level_regex + "]}"}) {
    EXPECT_THROW(load_tokenizer(write_tokenizer_json(dir, "bad", bad)), Error) << bad;
  }
}
