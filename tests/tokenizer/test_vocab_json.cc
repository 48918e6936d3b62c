#include <gtest/gtest.h>

#include "core/error.h"
#include "tokenizer/vocab_json.h"

using namespace fovea;

TEST(VocabJson, ParsesEscapesAndSurrogatePairs) {
  const auto vocab = parse_vocab_json(R"( {"a": 0, "\u0120b":1 ,"\"\\\/\n\t":2, "\ud83d\ude00": 3, "é": 4} )", "t");
  ASSERT_EQ(vocab.size(), 5u);
  EXPECT_EQ(vocab.at("a"), 0);
  EXPECT_EQ(vocab.at("\xC4\xA0"
                     "b"),
            1);
  EXPECT_EQ(vocab.at("\"\\/\n\t"), 2);
  EXPECT_EQ(vocab.at("\xF0\x9F\x98\x80"), 3);
  EXPECT_EQ(vocab.at("\xC3\xA9"), 4);
  EXPECT_TRUE(parse_vocab_json("{}", "t").empty());
}

TEST(VocabJson, RejectsMalformedInput) {
  for (const char* bad :
       {"", "[]", "{\"a\": 1", "{\"a\" 1}", "{\"a\": -1}", "{\"a\": x}", "{\"a\": 1,}", "{\"a\": 1} x",
        "{\"\\ud83d\": 1}", "{\"a\": 1, \"a\": 2}", "{\"a\": 99999999999}", "{\"\\q\": 1}", "{\"abc"})
    EXPECT_THROW(parse_vocab_json(bad, "t"), Error) << bad;
}
